"""A consumer-group member in its own process, for tests that SIGKILL a member.

Run as ``python member_child.py '<json spec>'`` (see ``consumer_support.ChildMember``). It builds
its consumer with the same implementation selection as the tests (``KGM_CONSUMER_IMPL``),
subscribes, and polls until killed. Everything it observes goes to line-buffered files so that a
SIGKILL loses at most the line being written:

* ``events``: one JSON object per rebalance callback ``{"at", "kind", "partitions"}``, ``at``
  being ``time.monotonic()`` (system-wide on Linux, so comparable with the parent's stamps);
* ``consumed``: ``partition offset`` per record, written before the record counts as processed;
* ``commits``: ``partition offset`` per committed partition, written after ``commit()`` returned.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from confluent_kafka import TopicPartition
from consumer_support import build_consumer


def _write_event(out: TextIO, kind: str, partitions: list[TopicPartition]) -> None:
    entry = {
        "at": time.monotonic(),
        "kind": kind,
        "partitions": [[tp.topic, tp.partition] for tp in partitions],
    }
    out.write(json.dumps(entry) + "\n")


def main(spec: dict[str, Any]) -> None:
    consumer = build_consumer(spec["config"], spec["impl"])
    manual = spec["commit_mode"] == "manual"
    delay = float(spec["batch_delay_s"])
    positions: dict[tuple[str, int], int] = {}  # next offset to consume, per partition

    with (
        open(spec["events"], "a", buffering=1) as events,
        open(spec["consumed"], "a", buffering=1) as consumed,
        open(spec["commits"], "a", buffering=1) as commits,
    ):

        def commit(parts: list[tuple[str, int]]) -> None:
            offsets = [
                TopicPartition(t, p, positions[(t, p)]) for t, p in parts if (t, p) in positions
            ]
            if not offsets:
                return
            result = consumer.commit(offsets=offsets, asynchronous=False)
            for tp in result or offsets:
                if tp.error is None:
                    commits.write(f"{tp.partition} {tp.offset}\n")

        def on_assign(_c: Any, partitions: list[TopicPartition]) -> None:
            _write_event(events, "assign", partitions)

        def on_revoke(_c: Any, partitions: list[TopicPartition]) -> None:
            if manual:
                commit([(tp.topic, tp.partition) for tp in partitions])
            for tp in partitions:
                positions.pop((tp.topic, tp.partition), None)
            _write_event(events, "revoke", partitions)

        def on_lost(_c: Any, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                positions.pop((tp.topic, tp.partition), None)
            _write_event(events, "lost", partitions)

        consumer.subscribe(
            spec["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
        )
        while True:
            batch = [m for m in consumer.consume(100, 0.1) if m.error() is None]
            if not batch:
                continue
            for message in batch:
                consumed.write(f"{message.partition()} {message.offset()}\n")
                positions[(message.topic(), message.partition())] = message.offset() + 1
            if delay:
                time.sleep(delay)  # simulated processing time, so a kill lands mid-stream
            if manual:
                commit(sorted({(m.topic(), m.partition()) for m in batch}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
