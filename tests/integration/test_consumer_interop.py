"""Interop: our members and librdkafka's KIP-848 members in one consumer group.

The group holds two members of the selected implementation and two ``confluent_kafka.Consumer``
members with ``group.protocol=consumer`` (in confluent mode all four are librdkafka). Numbered
records flow while members join and leave; the test asserts that every partition was consumed,
that no partition was owned by two members at once (from the callback timelines of both kinds
of member), and that no record was lost.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from callback_timeline import (
    all_partitions,
    wait_for_balanced,
)
from confluent_kafka.admin import AdminClient
from consumer_support import (
    CONVERGENCE_S,
    ConsumerFactory,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
    make_producer,
    produce_numbered,
    values_of,
)
from member_thread import (
    Group,
    MemberThread,
)

from tests.support import CONFLUENT, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
RECORDS = 30_000


@pytest.mark.timeout(180)
def test_mixed_group_consumes_everything_without_double_ownership(
    make_consumer: ConsumerFactory,
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group_id = unique_name("group")
    everything = all_partitions(topic, PARTITIONS)
    config = {"group.id": group_id, "auto.offset.reset": "earliest"}
    producer = make_producer(kafka_bootstrap)
    group = Group()
    chunk = RECORDS // 3

    def member(name: str, impl: str) -> MemberThread:
        return group.add(
            MemberThread(name, make_consumer(config, impl=impl), [topic], group.timeline)
        )

    try:
        produce_numbered(producer, topic, 0, chunk, PARTITIONS)
        member("ours-1", make_consumer.impl)
        member("cf-1", CONFLUENT)
        wait_for_balanced(group.timeline, ["ours-1", "cf-1"], everything)

        produce_numbered(producer, topic, chunk, chunk, PARTITIONS, flush=False)
        member("ours-2", make_consumer.impl)
        member("cf-2", CONFLUENT)
        four = ["ours-1", "cf-1", "ours-2", "cf-2"]
        assignment = wait_for_balanced(group.timeline, four, everything)
        assert all(assignment[name] for name in four), f"every member owns something: {assignment}"
        producer.flush(30)

        produce_numbered(producer, topic, 2 * chunk, RECORDS - 2 * chunk, PARTITIONS, flush=False)
        group.members["ours-1"].stop()
        group.members["cf-2"].stop()
        wait_for_balanced(group.timeline, ["cf-1", "ours-2"], everything)
        assert producer.flush(30) == 0

        def consumed_values() -> set[int]:
            return set().union(*(values_of(m.consumed) for m in group.members.values()))

        wait_until(
            lambda: len(consumed_values()) >= RECORDS,
            CONVERGENCE_S * 2,
            f"all {RECORDS} records to be consumed",
            details=lambda: f"consumed {len(consumed_values())} distinct values",
        )
    finally:
        group.stop_all()

    lost = set(range(RECORDS)) - consumed_values()
    assert not lost, f"{len(lost)} records lost, e.g. {sorted(lost)[:10]}"
    consumed_partitions = {p for m in group.members.values() for p, _o, _v in m.consumed}
    assert consumed_partitions == set(range(PARTITIONS))
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()
    for name in group.members:
        owned = [e for e in group.timeline.events(name) if e.kind == "assign" and e.partitions]
        assert owned, f"{name} never owned a partition; the group was not really mixed"
    errors = {name: m.errors for name, m in group.members.items() if m.errors}
    assert not errors, f"poll() returned errors: {errors}"
