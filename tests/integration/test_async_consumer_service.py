"""``examples/async_service.py`` as a process: it consumes, and on SIGTERM it stops polling,
commits what it handled, closes and exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from consumer_support import make_producer, produce_numbered

from consumer import Consumer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "examples" / "async_service.py"


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        probe.subscribe([topic])  # committed() speaks for the group through a member
        result = probe.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return [tp.offset for tp in result]
    finally:
        probe.close()


async def read_line(stream: asyncio.StreamReader, deadline: float, output: list[str]) -> str:
    remaining = deadline - time.monotonic()
    assert remaining > 0, "the service printed too little in time:\n" + "".join(output[-20:])
    line = (await asyncio.wait_for(stream.readline(), remaining)).decode()
    assert line, "the service's output ended early:\n" + "".join(output[-20:])
    output.append(line)
    return line


async def test_sigterm_stops_polling_commits_and_closes(
    kafka_bootstrap: str, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic, group = create_topic(partitions=3), unique_name("group")
    produce_numbered(make_producer(kafka_bootstrap), topic, 0, 250, 3)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVICE),
        kafka_bootstrap,
        topic,
        group,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    output: list[str] = []
    try:
        deadline = time.monotonic() + 60
        processed = 0
        while processed < 250:  # 250: commits every 100, so 50 are committed only at shutdown
            line = await read_line(process.stdout, deadline, output)
            processed += line.startswith("processed ")
        process.send_signal(signal.SIGTERM)
        rest = (await asyncio.wait_for(process.stdout.read(), 30)).decode()
        exit_code = await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert exit_code == 0, "".join(output[-20:]) + rest
    assert rest.splitlines()[-1:] == ["stopped"], rest
    assert "processed" not in rest  # nothing was left to consume
    assert committed_offsets(kafka_bootstrap, group, topic, 3) == [84, 83, 83]
