"""Consumers work when the application runs on uvloop, against the real broker.

The background loop is made with ``asyncio.new_event_loop()``, so it follows the event-loop
policy the application installed: after ``uvloop.install()`` it is a uvloop loop. uvloop's TCP
transport is not a subclass of ``asyncio.Transport``; the connection once asserted that it was,
and under ``uvloop.install()`` every connection failed in its first callback (logged by asyncio,
otherwise silent: the consumer never got a partition). Each mode runs in a fresh child process
(``event_loop_child.py``), since the policy must be set before the process's first consumer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from share_consumer_support import REPO_ROOT, share_group

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 3
RECORDS = 60


@pytest.fixture
def filled_topic(kafka_bootstrap: str, create_topic: Callable[..., str]) -> str:
    topic = create_topic(partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    for n in range(RECORDS):
        producer.produce(topic, value=str(n).encode(), partition=n % PARTITIONS)
    assert producer.flush(30) == 0
    return topic


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.event_loop_child", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": python_path},
        check=False,
    )
    assert done.returncode == 0, f"child exited {done.returncode}: {done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_every_consumer_kind_runs_on_uvloop_installed_as_the_policy(
    kafka_bootstrap: str,
    admin: AdminClient,
    filled_topic: str,
    unique_name: Callable[[str], str],
) -> None:
    result = run_child(
        {
            "mode": "install",
            "bootstrap": kafka_bootstrap,
            "topic": filled_topic,
            "partitions": PARTITIONS,
            "records": RECORDS,
            "group": unique_name("uvloop"),
            "share": share_group(admin, unique_name),
        }
    )
    assert result["asyncio_errors"] == []
    assert result["new_event_loop"] == "Loop"  # uvloop.Loop: the policy is in force
    assert result["consumer"] == {"read": RECORDS, "committed": RECORDS, "background_loop": "Loop"}
    assert result["async_consumer"] == {
        "read": RECORDS,
        "committed": RECORDS,
        "background_loop": "Loop",
        "application_loop": "Loop",
    }
    assert result["share_consumer"] == {"read": RECORDS}


def test_an_async_consumer_runs_inside_uvloop_run(
    kafka_bootstrap: str, filled_topic: str, unique_name: Callable[[str], str]
) -> None:
    result = run_child(
        {
            "mode": "run",
            "bootstrap": kafka_bootstrap,
            "topic": filled_topic,
            "partitions": PARTITIONS,
            "records": RECORDS,
            "group": unique_name("uvloop"),
        }
    )
    assert result["asyncio_errors"] == []
    # uvloop.run() makes only the application's loop a uvloop loop; ours stays asyncio's.
    assert result["async_consumer"] == {
        "read": RECORDS,
        "committed": RECORDS,
        "background_loop": "_UnixSelectorEventLoop",
        "application_loop": "Loop",
    }
