"""Our ``ShareConsumer`` and confluent-kafka's ``ShareConsumer`` in one share group, against a
real Kafka 4.3 broker: two of each on a two-partition topic split the records between both kinds,
and every record is accepted exactly once (nothing lost, nothing twice, nothing left over).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient
from share_consumer_support import (
    Delivery,
    PollingMember,
    ShareConsumers,
    describe_share_group,
    exactly_once_problems,
    nothing_left,
    produce,
    share_consumers_fixture,  # noqa: F401 - the share_consumers fixture
    share_group,
)

from tests.support import CONFLUENT, OURS, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def test_ours_and_confluents_share_consumers_split_one_group(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
) -> None:
    topic = create_topic(partitions=2)
    group_id = share_group(admin, unique_name)
    total = 2000
    members = [
        PollingMember(
            f"{impl}-{index}",
            share_consumers(group_id, impl, config={"max.poll.records": 50}),
            [topic],
        ).start()
        for impl in (OURS, CONFLUENT)
        for index in range(2)
    ]

    def four_assigned() -> bool:
        described = describe_share_group(kafka_bootstrap, group_id).values()
        return len([m for m in described if m.partitions]) == 4

    wait_until(four_assigned, 30, "four members assigned", interval_s=0.2)
    produce(kafka_bootstrap, topic, total, partitions=2, batch_records=50)

    def everything() -> list[Delivery]:
        return [d for member in members for d in member.received()]

    wait_until(
        lambda: len({d.number for d in everything()}) >= total,
        60,
        f"{total} records delivered",
        lambda: f"{len({d.number for d in everything()})} delivered",
    )
    for member in members:
        member.stop()  # ACCEPTs the last poll's records
    assert [m.errors for m in members] == [[]] * 4
    assert exactly_once_problems(everything(), total) == []
    by_kind = {
        impl: sum(len(m.received()) for m in members if m.name.startswith(impl))
        for impl in (OURS, CONFLUENT)
    }
    assert all(by_kind.values()), f"both kinds get records: {by_kind}"
    assert nothing_left(share_consumers(group_id), [topic]) == []
