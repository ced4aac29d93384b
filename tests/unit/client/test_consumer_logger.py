"""``logger`` and ``reconnect.backoff.ms`` reach the member's runtime (no broker: a closed port)."""

from __future__ import annotations

import logging
import time
from logging.handlers import BufferingHandler

import pytest

from consumer import Consumer


def retry_waits(records: list[logging.LogRecord]) -> list[float]:
    """The waits between connect attempts, from the debug records of their retries (the
    coordinator lookup around them retries with its own policy)."""
    return [
        float(message.split("retrying in ")[1].split()[0])
        for message in (record.getMessage() for record in records)
        if message.startswith("attempt") and "failed (could not connect to" in message
    ]


def test_the_runtime_logs_to_the_configured_logger_with_the_reconnect_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("tests.consumer_logger")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = BufferingHandler(capacity=1_000_000)
    logger.addHandler(handler)
    caplog.set_level(logging.DEBUG, logger="consumer")
    consumer = Consumer(
        {
            "bootstrap.servers": "127.0.0.1:1",  # closed: every connect is refused
            "group.id": "logger-test",
            "reconnect.backoff.ms": 1,
            "reconnect.backoff.max.ms": 2,
            "max.poll.interval.ms": 1000,
            "debug": "cgrp",  # the member's DEBUG records reach `logger` only with `debug` set
        },
        logger=logger,
    )
    try:
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 10
        while len(retry_waits(handler.buffer)) < 4 and time.monotonic() < deadline:
            consumer.poll(0.05)
    finally:
        consumer.close()
        logger.removeHandler(handler)
    waits = retry_waits(handler.buffer)
    assert len(waits) >= 4, [r.getMessage() for r in handler.buffer]
    assert all(0 <= wait <= 0.002 for wait in waits), waits  # default: up to 0.1 s and more
    assert retry_waits([r for r in caplog.records if r.name.startswith("consumer")]) == []
