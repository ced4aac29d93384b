"""What ``consumer.ShareConsumer`` delivers, against a real Kafka 4.3 broker.

Six members share a two-partition topic (more members than partitions, which only share groups
allow): all of them get records and each of 3,000 records is accepted exactly once, with nothing
left for a fresh member. With the group's ``share.delivery.count.limit=2`` a record RELEASEd each
time is delivered twice (counts 1, 2) and then archived while the others flow. Records produced
by confluent's Producer with each codec (gzip, snappy, lz4, zstd) and with headers come out of
the ShareConsumer exactly as produced (key, value, headers, timestamp).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Message, Producer
from confluent_kafka.admin import AdminClient
from share_consumer_support import (
    Delivery,
    PollingMember,
    ShareConsumers,
    describe_share_group,
    exactly_once_problems,
    nothing_left,
    number_of,
    poll_until,
    produce,
    share_consumers_fixture,  # noqa: F401 - the share_consumers fixture
    share_group,
)

from consumer import AcknowledgeType
from consumer._share_runtime import transport
from consumer._wire import Compression
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def test_six_members_on_two_partitions_accept_every_record_exactly_once(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
) -> None:
    topic = create_topic(partitions=2)
    group_id = share_group(admin, unique_name)
    total = 3000
    members = [
        PollingMember(f"m{i}", share_consumers(group_id, config={"max.poll.records": 50}), [topic])
        for i in range(6)
    ]
    ids = {member.consumer.memberid() for member in members}
    for member in members:
        member.start()

    def all_assigned() -> bool:
        described = describe_share_group(kafka_bootstrap, group_id)
        return ids <= described.keys() and all(described[i].partitions for i in ids)

    wait_until(all_assigned, 30, "six members assigned", interval_s=0.2)
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
    assert [m.errors for m in members] == [[]] * 6
    assert exactly_once_problems(everything(), total) == []
    per_member = {m.name: len(m.received()) for m in members}
    assert all(per_member.values()), f"every member gets records: {per_member}"
    assert nothing_left(share_consumers(group_id), [topic]) == []


def test_a_record_released_at_the_delivery_limit_is_archived(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
) -> None:
    topic = create_topic(partitions=1)
    group_id = share_group(admin, unique_name, share_delivery_count_limit="2")
    poison = 3
    produce(kafka_bootstrap, topic, 10)
    consumer = share_consumers(group_id, config={"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    poison_counts: list[int | None] = []
    accepted: list[int] = []

    def handle(batch: list[Message]) -> None:
        for message in batch:
            if number_of(message) == poison:
                poison_counts.append(message.delivery_count())
                consumer.acknowledge(message, AcknowledgeType.RELEASE)
            else:
                accepted.append(number_of(message))
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)

    deadline = time.monotonic() + 30
    while len(poison_counts) < 2 or len(accepted) < 9:
        assert time.monotonic() < deadline, f"poison {poison_counts}, accepted {accepted}"
        handle(list(consumer.poll(0.5)))
    assert poison_counts == [1, 2]

    # The second RELEASE reached the limit: the record is archived. Later records flow and it
    # never comes back (a released record below them would be acquired first).
    produce(kafka_bootstrap, topic, 10, start=10)
    deadline = time.monotonic() + 30
    while len(accepted) < 19:
        assert time.monotonic() < deadline, f"poison {poison_counts}, accepted {accepted}"
        handle(list(consumer.poll(0.5)))
    consumer.commit_sync(30)
    assert poison_counts == [1, 2], "archived after its second delivery"
    assert sorted(accepted) == [n for n in range(20) if n != poison]
    consumer.close()
    assert nothing_left(share_consumers(group_id), [topic], window_s=2.0) == []


CODECS = ("gzip", "snappy", "lz4", "zstd")


def test_compressed_records_with_headers_round_trip_exactly(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    share_consumers: ShareConsumers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(partitions=1)
    group_id = share_group(admin, unique_name)
    base_ms = int(time.time() * 1000) - 60_000
    expected: dict[bytes, tuple[Any, ...]] = {}
    for codec in CODECS:
        producer = Producer(
            {"bootstrap.servers": kafka_bootstrap, "compression.type": codec, "linger.ms": 50}
        )
        for index in range(25):
            key = f"{codec}-{index}".encode()
            value = (f"{codec} record {index} " * 20).encode()
            headers: list[tuple[str, str | bytes | None]] = [
                ("trace", f"t-{codec}-{index}".encode()),
                ("dup", b"first"),
                ("dup", b"second"),
                ("empty", b""),
                ("null", None),
            ]
            timestamp_ms = base_ms + len(expected)
            producer.produce(topic, value=value, key=key, headers=headers, timestamp=timestamp_ms)
            expected[key] = (value, headers, (TIMESTAMP_CREATE_TIME, timestamp_ms))
        assert producer.flush(30) == 0

    # Observe the codec of every batch the ShareConsumer's data plane decodes.
    codecs_seen: set[Compression] = set()
    parse = transport.parse_share_fetch_response

    def parse_and_note(response: Any) -> Any:
        result = parse(response)
        for partition in result.partitions:
            codecs_seen.update(batch.compression for batch in partition.records.batches)
        return result

    monkeypatch.setattr(transport, "parse_share_fetch_response", parse_and_note)
    consumer = share_consumers(group_id)
    consumer.subscribe([topic])
    got = poll_until(consumer, lambda so_far: len(so_far) >= len(expected))
    consumer.close()

    assert {Compression[c.upper()] for c in CODECS} <= codecs_seen, codecs_seen
    received = {
        m.key(): (m.value(), m.headers(), m.timestamp()) for m in got if m.key() is not None
    }
    assert len(got) == len(expected)
    assert received == expected
    assert {m.delivery_count() for m in got} == {1}
