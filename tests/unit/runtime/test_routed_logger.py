"""The ``logger`` key: a consumer's own records go to the logger bound to its thread's context."""

from __future__ import annotations

import contextvars
import logging
import threading
from logging.handlers import BufferingHandler

import pytest

from consumer._client.settings import cluster_settings
from consumer._logging import RoutedLogger, log_to, routed_logger
from consumer.config import parse_config


def user_logger(name: str) -> tuple[logging.Logger, BufferingHandler]:
    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = BufferingHandler(capacity=1_000_000)
    logger.addHandler(handler)
    return logger, handler


def test_without_a_bound_logger_records_go_to_the_module_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = routed_logger("consumer.test_routed")
    caplog.set_level(logging.DEBUG, logger="consumer.test_routed")
    contextvars.Context().run(log.warning, "plain %s", "record")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("consumer.test_routed", "plain record")
    ]


def test_a_bound_logger_gets_the_records_naming_their_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger, handler = user_logger("tests.routed.bound")
    log = routed_logger("consumer.test_routed")
    caplog.set_level(logging.DEBUG, logger="consumer.test_routed")

    def in_context() -> None:
        log_to(logger)
        log.debug("debug %d", 1)
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")

    contextvars.Context().run(in_context)
    assert [(r.levelno, r.getMessage()) for r in handler.buffer] == [
        (logging.DEBUG, "debug 1"),
        (logging.ERROR, "failed"),
    ]
    assert {r.funcName for r in handler.buffer} == {"in_context"}
    assert {r.pathname for r in handler.buffer} == {__file__}
    assert handler.buffer[1].exc_info is not None
    assert caplog.records == []  # nothing reached the module logger


def test_the_bound_loggers_level_decides() -> None:
    logger, handler = user_logger("tests.routed.level")
    logger.setLevel(logging.WARNING)
    log = RoutedLogger("consumer.test_routed")

    def in_context() -> bool:
        log_to(logger)
        log.info("dropped")
        log.warning("kept")
        return log.isEnabledFor(logging.INFO)

    assert contextvars.Context().run(in_context) is False
    assert [r.getMessage() for r in handler.buffer] == ["kept"]


def test_threads_keep_their_own_logger_apart() -> None:
    log = routed_logger("consumer.test_routed")
    loggers = [user_logger(f"tests.routed.thread{n}") for n in range(2)]

    def run(logger: logging.Logger, n: int) -> None:
        log_to(logger)
        log.warning("from thread %d", n)

    threads = [threading.Thread(target=run, args=(lg, n)) for n, (lg, _) in enumerate(loggers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [[r.getMessage() for r in handler.buffer] for _, handler in loggers] == [
        ["from thread 0"],
        ["from thread 1"],
    ]


def test_a_logger_adapter_is_accepted() -> None:
    logger, handler = user_logger("tests.routed.adapter")
    adapter = logging.LoggerAdapter(logger, {"tag": "x"})
    log = routed_logger("consumer.test_routed")

    def in_context() -> None:
        log_to(adapter)
        log.warning("through an adapter")

    contextvars.Context().run(in_context)
    assert [(r.getMessage(), getattr(r, "tag", None)) for r in handler.buffer] == [
        ("through an adapter", "x")
    ]


def _member_logger_records(
    config: dict[str, object], caplog: pytest.LogCaptureFixture
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(records the user's logger got, records the package logger got) from one member log call
    of each level, with the logger the consumer's settings bind for ``config``."""
    logger, handler = user_logger(f"tests.routed.member.{len(config)}")
    settings = cluster_settings(
        parse_config(
            {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **config, "logger": logger}
        )
    )
    log = routed_logger("consumer.test_member_logger")
    caplog.set_level(logging.DEBUG, logger="consumer")

    def in_context() -> None:
        log_to(settings.logger)
        log.debug("member debug")
        log.warning("member warning")

    contextvars.Context().run(in_context)
    package = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "consumer"]
    return [(r.levelno, r.getMessage()) for r in handler.buffer], package


def test_without_debug_the_member_debug_records_stay_off_the_users_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As librdkafka: debug records reach ``logger`` only for the contexts named in ``debug``.
    user, package = _member_logger_records({}, caplog)
    assert user == [(logging.WARNING, "member warning")]
    assert package == []  # dropped, not sent to the package's logger


def test_with_debug_the_member_debug_records_reach_the_users_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    user, package = _member_logger_records({"debug": "cgrp"}, caplog)
    assert user == [(logging.DEBUG, "member debug"), (logging.WARNING, "member warning")]
    assert package == []
