"""Exactly-once read-process-write when a member is killed with SIGKILL, its transaction open.

Members of ``consumer.Consumer`` with transactional confluent-kafka producers (see
``exactly_once_support.py``) read a 4-partition topic and write it to a 1-partition topic. One
member runs in its own process (``exactly_once_child.py``); another joins, writes and leaves;
then the process member produces a batch, flushes it to the broker and is SIGKILLed before it
commits. Its instance is restarted with the same ``transactional.id``, as a supervisor would:
``init_transactions`` fences the dead producer and aborts its open transaction. The output read
with ``isolation.level=read_committed`` must hold every input exactly once, the killed batch
included (read again by whoever owns its partitions after the broker expires the dead member).
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from tests.integration.consumer_support import make_producer, produce_numbered
from tests.integration.exactly_once_child import read_events, spawn_stage
from tests.integration.exactly_once_support import TransactionalStage, committed_output
from tests.support import wait_until

pytestmark = pytest.mark.integration

_RECORDS = 300
_PARTITIONS = 4
_TIMEOUT_S = 60.0


class _Victim:
    """The member process that is killed, seen through its events file."""

    def __init__(self, spec: dict[str, Any], workdir: Path) -> None:
        self.events = Path(spec["events"])
        self.stderr = workdir / "victim.stderr.txt"
        self.process: subprocess.Popen[bytes] = spawn_stage(spec, self.stderr)

    def last(self, event: str) -> dict[str, Any] | None:
        found = [e for e in read_events(self.events) if e["event"] == event]
        return found[-1] if found else None

    def owned(self) -> list[int]:
        last = self.last("owned")
        return list(last["partitions"]) if last else []

    def committed(self) -> int:
        return sum(e["count"] for e in read_events(self.events) if e["event"] == "committed")

    def alive_or_fail(self) -> None:
        code = self.process.poll()
        if code is not None:
            text = self.stderr.read_text(errors="replace")[-3000:]
            raise AssertionError(f"the member process exited with {code}:\n{text}")

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def ensure_dead(self) -> None:
        if self.process.poll() is None:
            self.kill()


def test_a_member_killed_inside_a_transaction_leaves_every_input_written_exactly_once(
    kafka_bootstrap: str, create_topic: Any, unique_name: Any, tmp_path: Path
) -> None:
    source = create_topic(partitions=_PARTITIONS)
    sink = create_topic(partitions=1)
    group = unique_name("eos-kill")
    producer = make_producer(kafka_bootstrap)
    victim_transactional_id = f"eos-victim-{uuid.uuid4().hex[:8]}"
    hold = tmp_path / "hold"
    victim = _Victim(
        {
            "bootstrap": kafka_bootstrap,
            "group": group,
            "source": source,
            "sink": sink,
            "transactional_id": victim_transactional_id,
            "events": str(tmp_path / "victim.jsonl"),
            "hold": str(hold),
        },
        tmp_path,
    )
    first = TransactionalStage(kafka_bootstrap, group, source, sink)
    stages = [first]

    def run_until(done: Callable[[], object], what: str, *, victim_alive: bool = True) -> None:
        def turn() -> bool:
            if victim_alive:
                victim.alive_or_fail()
            for stage in stages:
                stage.step()
            return bool(done())

        def details() -> str:
            lines = [s.describe() for s in stages]
            lines.append(f"process member: owns {victim.owned()}, wrote {victim.committed()}")
            return "\n".join(lines)

        wait_until(turn, _TIMEOUT_S, what, details, interval_s=0.0)

    def spread() -> bool:
        owned = [len(s.consumer.assignment()) for s in stages] + [len(victim.owned())]
        return sum(owned) == _PARTITIONS and min(owned) > 0

    def group_committed() -> int:
        offsets = first.consumer.committed(
            [TopicPartition(source, p) for p in range(_PARTITIONS)], timeout=10
        )
        return sum(max(tp.offset, 0) for tp in offsets)

    try:
        run_until(spread, "the partitions spread over the two members")
        produce_numbered(producer, source, 0, 100, _PARTITIONS)
        run_until(
            lambda: first.committed > 0 and victim.committed() > 0,
            "both members writing transactions",
        )
        # A member joins, writes some of the next records, and leaves.
        joining = TransactionalStage(kafka_bootstrap, group, source, sink)
        stages.append(joining)
        run_until(spread, "the partitions spread over the three members")
        produce_numbered(producer, source, 100, 100, _PARTITIONS)
        run_until(lambda: joining.committed > 0, "the joining member writing")
        stages.remove(joining)
        joining.close()
        # The process member's next batch goes to the broker inside a transaction that it
        # never commits: it is killed first.
        hold.touch()
        produce_numbered(producer, source, 200, _RECORDS - 200, _PARTITIONS)
        run_until(lambda: victim.last("holding"), "the process member holding a transaction")
        victim.kill()
        held = victim.last("holding")
        assert held is not None, "the killed member wrote no holding event"
        assert held["values"], "the killed member held no records"
        restarted = TransactionalStage(
            kafka_bootstrap, group, source, sink, transactional_id=victim_transactional_id
        )
        stages.append(restarted)
        run_until(
            lambda: group_committed() == _RECORDS,
            f"offsets of all {_RECORDS} records committed",
            victim_alive=False,
        )
        output = Counter(committed_output(kafka_bootstrap, sink))
    finally:
        victim.ensure_dead()
        for stage in stages:
            stage.close()

    assert set(output) == set(range(_RECORDS)), (
        f"missing: {sorted(set(range(_RECORDS)) - set(output))}"
    )
    assert [v for v, n in output.items() if n > 1] == [], "duplicates in the committed output"
    assert all(output[v] == 1 for v in held["values"]), "the killed batch is not there once"
