"""At-least-once delivery under membership churn, with auto-commit, manual commits and a SIGKILL.

Numbered records (value = sequence number) are produced in chunks while a group of three members
goes through ten cycles of "a new member joins, the oldest leaves with close()", i.e. twenty
graceful membership changes with records in flight. Every consumed ``(partition, offset)`` is
counted. Graceful leaves commit before they release a partition (auto-commit on revocation, or
the application's commit in ``on_revoke``), so the runs must show 0 lost and 0 duplicates.

The SIGKILL run replaces "graceful" by a member killed mid-stream in a child process; there the
only duplicates allowed are records the killed member consumed after its last commit of that
partition, and nothing may be lost.

Sizes: both churn runs use 100,000 records (on a 2-core machine the manual-commit run, which
commits synchronously after every batch of up to 500 records, takes about as long as the
auto-commit one). The SIGKILL run uses 20,000: its duration is dominated by the 6 s session
timeout, not by the record count.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from callback_timeline import (
    all_partitions,
    wait_for_balanced,
)
from child_member import (
    ChildMember,
)
from confluent_kafka import Message, TopicPartition
from consumer_support import (
    CONVERGENCE_S,
    SESSION_TIMEOUT_S,
    ConsumerFactory,
    duplicates,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
    make_producer,
    produce_numbered,
    values_of,
)
from member_thread import (
    Group,
    MemberThread,
)

from tests.support import (
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
CHURN_RECORDS = 100_000
CHURN_CYCLES = 10
KILL_RECORDS = 20_000
BATCH = 500

CommitMode = Literal["auto", "manual"]


class ManualCommitter:
    """Manual commits for one member: after each processed batch, and in ``on_revoke``."""

    def __init__(self) -> None:
        self.positions: dict[tuple[str, int], int] = {}  # next offset to consume
        self.lock = threading.Lock()

    def after_batch(self, member: MemberThread, messages: list[Message]) -> None:
        MemberThread.record_consumed(member, messages)
        touched: set[tuple[str, int]] = set()
        for message in messages:
            key = (message.topic(), message.partition())
            self.positions[key] = message.offset() + 1
            touched.add(key)
        self.commit(member.consumer, sorted(touched))

    def on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self.commit(consumer, keys)
        for key in keys:
            self.positions.pop(key, None)

    def commit(self, consumer: Any, keys: list[tuple[str, int]]) -> None:
        offsets = [
            TopicPartition(t, p, self.positions[(t, p)])
            for t, p in keys
            if (t, p) in self.positions
        ]
        if not offsets:
            return
        result = consumer.commit(offsets=offsets, asynchronous=False)
        failed = [tp for tp in result or [] if tp.error is not None]
        assert not failed, f"commit failed for {failed}"


def member_config(group_id: str, mode: CommitMode) -> dict[str, object]:
    config: dict[str, object] = {"group.id": group_id, "auto.offset.reset": "earliest"}
    if mode == "auto":
        config.update({"enable.auto.commit": True, "auto.commit.interval.ms": 100})
    else:
        config["enable.auto.commit"] = False
    return config


def new_member(
    group: Group, factory: ConsumerFactory, name: str, group_id: str, topic: str, mode: CommitMode
) -> MemberThread:
    consumer = factory(member_config(group_id, mode))
    if mode == "manual":
        committer = ManualCommitter()
        member = MemberThread(
            name,
            consumer,
            [topic],
            group.timeline,
            on_messages=committer.after_batch,
            on_revoke_extra=committer.on_revoke,
            batch_size=BATCH,
        )
    else:
        member = MemberThread(name, consumer, [topic], group.timeline, batch_size=BATCH)
    return group.add(member)


def consumed_pairs(group: Group) -> list[tuple[int, int]]:
    return [(p, o) for m in group.members.values() for p, o, _v in m.consumed]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_churn_loses_nothing_and_duplicates_nothing(
    mode: CommitMode,
    make_consumer: ConsumerFactory,
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group_id = unique_name("group")
    everything = all_partitions(topic, PARTITIONS)
    producer = make_producer(kafka_bootstrap)
    group = Group()
    actions = 2 * CHURN_CYCLES
    chunk = CHURN_RECORDS // (actions + 1)
    produced = 0

    def produce_chunk(count: int) -> None:
        nonlocal produced
        produce_numbered(producer, topic, produced, count, PARTITIONS, flush=False)
        produced += count

    live: list[str] = []
    try:
        produce_chunk(chunk)
        for index in range(3):
            live.append(new_member(group, make_consumer, f"m{index}", group_id, topic, mode).name)
        wait_for_balanced(group.timeline, live, everything)

        for cycle in range(CHURN_CYCLES):
            produce_chunk(chunk)  # records in flight while the group rebalances
            joiner = new_member(group, make_consumer, f"m{cycle + 3}", group_id, topic, mode)
            live.append(joiner.name)
            wait_for_balanced(group.timeline, live, everything)
            assert producer.flush(30) == 0

            produce_chunk(chunk if cycle < CHURN_CYCLES - 1 else CHURN_RECORDS - produced)
            leaver = live.pop(0)
            group.members[leaver].stop()  # graceful: close() on the member's thread
            wait_for_balanced(group.timeline, live, everything)
            assert producer.flush(30) == 0

        assert produced == CHURN_RECORDS
        wait_until(
            lambda: len(consumed_pairs(group)) >= CHURN_RECORDS,
            CONVERGENCE_S * 2,
            f"{CHURN_RECORDS} records consumed",
            details=lambda: f"consumed {len(consumed_pairs(group))}",
        )
    finally:
        group.stop_all()

    consumed = [record for m in group.members.values() for record in m.consumed]
    lost = set(range(CHURN_RECORDS)) - values_of(consumed)
    assert not lost, f"{len(lost)} records lost, e.g. {sorted(lost)[:10]}"
    repeated = duplicates((p, o) for p, o, _v in consumed)
    assert not repeated, (
        f"{len(repeated)} records consumed more than once after graceful leaves, "
        f"e.g. {sorted(repeated.items())[:10]}"
    )
    assert len(group.members) == 3 + CHURN_CYCLES
    joins = [n for n in group.members if group.timeline.count(n, ["assign"]) > 0]
    assert len(joins) == len(group.members), "every member took part in the group"
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()
    errors = {name: m.errors for name, m in group.members.items() if m.errors}
    assert not errors, f"poll() returned errors: {errors}"


@pytest.mark.timeout(150)
def test_sigkill_duplicates_only_what_was_consumed_after_the_last_commit(
    make_consumer: ConsumerFactory,
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group_id = unique_name("group")
    everything = all_partitions(topic, PARTITIONS)
    group = Group()
    child = ChildMember(
        "killed",
        tmp_path,
        make_consumer.config_for_child(member_config(group_id, "manual")),
        [topic],
        commit_mode="manual",
        batch_delay_s=0.02,  # ~5,000 records/s: the kill lands while it still has records to do
    )
    try:
        wait_until(
            lambda: len(child.owned()) == PARTITIONS,
            CONVERGENCE_S,
            "the child member to own every partition",
            details=child.failure_text,
        )
        for name in ("B", "C"):
            new_member(group, make_consumer, name, group_id, topic, "manual")

        def three_way() -> bool:
            owned = [child.owned(), *group.timeline.assignment(["B", "C"]).values()]
            return sorted(len(p) for p in owned) == [2, 2, 2] and set().union(*owned) == everything

        wait_until(three_way, CONVERGENCE_S, "a 2/2/2 assignment", details=group.timeline.dump)
        produce_numbered(make_producer(kafka_bootstrap), topic, 0, KILL_RECORDS, PARTITIONS)
        wait_until(
            lambda: len(child.consumed_pairs()) >= 1000,
            CONVERGENCE_S,
            "the child to consume 1000 records",
            details=child.failure_text,
        )
        assert child.process.poll() is None, "the child member died on its own"
        killed_at = child.kill()
        group.timeline.merge_child_events("killed", child.events)
        group.timeline.mark_killed("killed", killed_at)

        wait_for_balanced(group.timeline, ["B", "C"], everything, SESSION_TIMEOUT_S + CONVERGENCE_S)

        def all_consumed() -> bool:
            pairs = set(consumed_pairs(group)) | set(child.consumed_pairs())
            return len(pairs) >= KILL_RECORDS

        wait_until(all_consumed, CONVERGENCE_S, f"{KILL_RECORDS} records consumed")
    finally:
        child.ensure_dead()
        group.stop_all()

    survivors = [record for m in group.members.values() for record in m.consumed]
    by_child = child.consumed_pairs()
    all_pairs = [(p, o) for p, o, _v in survivors] + by_child
    # Fresh topic, idempotent producer, record n on partition n % 6: partition p holds offsets
    # 0 .. len(range(p, KILL_RECORDS, 6)) - 1.
    expected = {
        (p, o) for p in range(PARTITIONS) for o in range(len(range(p, KILL_RECORDS, PARTITIONS)))
    }
    lost = expected - set(all_pairs)
    assert not lost, f"{len(lost)} records lost, e.g. {sorted(lost)[:10]}"
    last_commit = child.committed()
    assert last_commit, "the child committed at least once before it was killed"
    child_set = set(by_child)
    repeated = duplicates(all_pairs)
    unexplained = {
        (p, o): n
        for (p, o), n in repeated.items()
        if n != 2 or (p, o) not in child_set or o < last_commit.get(p, 0)
    }
    assert not unexplained, (
        "duplicates other than records the killed member consumed after its last commit: "
        f"{sorted(unexplained.items())[:10]} (last commits {last_commit})"
    )
    assert not duplicates((p, o) for p, o, _v in survivors), "survivors never overlap each other"
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()
