"""A read-process-write member in its own process, for the exactly-once test that SIGKILLs one.

Run as ``python -m tests.integration.exactly_once_child SPEC`` (see :func:`spawn_stage`);
``SPEC`` is a JSON object with ``bootstrap``, ``group``, ``source``, ``sink``,
``transactional_id``, ``events`` (the JSON-lines file it writes) and ``hold`` (a path: once it
exists, the member produces its next batch, flushes it to the broker and then waits, its
transaction open, until it is killed).

Each event is one flushed line: ``{"event": "owned", "partitions": [...]}`` after each
``on_assign``/``on_revoke``, ``{"event": "committed", "count": n}`` after each committed
transaction of ``n`` records, and ``{"event": "holding", "values": [...]}`` once the held batch
is on the broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Message, TopicPartition

from tests.integration.exactly_once_support import TransactionalStage

_REPO_ROOT = Path(__file__).resolve().parents[2]


def spawn_stage(spec: Mapping[str, Any], stderr_path: Path) -> subprocess.Popen[bytes]:
    """Start a member process running ``spec``; its stderr goes to ``stderr_path``."""
    python_path = os.pathsep.join(filter(None, [str(_REPO_ROOT), os.environ.get("PYTHONPATH")]))
    with open(stderr_path, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.exactly_once_child", json.dumps(dict(spec))],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path},
        )


def read_events(path: Path) -> list[dict[str, Any]]:
    """The complete lines the member wrote so far (a torn last line after SIGKILL is left out)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


class _Events:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.owned: set[int] = set()

    def write(self, event: str, **fields: Any) -> None:
        self._stream.write(json.dumps({"event": event, **fields}) + "\n")
        self._stream.flush()

    def on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}
        self.write("owned", partitions=sorted(self.owned))

    def on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned -= {tp.partition for tp in partitions}
        self.write("owned", partitions=sorted(self.owned))


def main() -> int:
    spec = json.loads(sys.argv[1])
    hold = Path(spec["hold"])
    with open(spec["events"], "a", encoding="utf-8") as stream:
        events = _Events(stream)
        stage = TransactionalStage(
            spec["bootstrap"],
            spec["group"],
            spec["source"],
            spec["sink"],
            transactional_id=spec["transactional_id"],
            on_assign=events.on_assign,
            on_revoke=events.on_revoke,
        )

        def hold_when_asked(batch: list[Message]) -> None:
            if not hold.exists():
                return
            remaining = stage.producer.flush(30)
            assert remaining == 0, f"{remaining} records of the held batch not delivered"
            events.write("holding", values=[int(m.value() or b"-1") for m in batch])
            threading.Event().wait()  # the transaction stays open until the test kills us

        while True:
            committed_before = stage.committed
            batch_size = stage.step(before_commit=hold_when_asked)
            if stage.committed > committed_before:
                events.write("committed", count=batch_size)


if __name__ == "__main__":
    sys.exit(main())
