"""``commit()`` without offsets inside ``on_revoke``: the same on ``consumer.Consumer`` and on
``confluent_kafka.Consumer`` (``group.protocol=consumer``), against the real broker.

During ``on_revoke`` the revoked partitions are still part of the assignment (fetching them has
stopped), so a commit of "what was consumed" includes them: librdkafka commits the consumed
offsets of every assigned partition, revoked ones included, and reports them to ``on_commit``.
A consumer that commits in ``on_revoke`` (the common hand-over pattern) thus leaves nothing to
read again for the next owner. Asynchronous and synchronous commits, on ``unsubscribe()`` and on
a rebalance that moves one of two partitions to a new member.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from tests.integration.consumer_support import (
    CONVERGENCE_S,
    ConsumerFactory,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
    make_producer,
    produce_numbered,
)
from tests.support import CONFLUENT, OURS, wait_until

pytestmark = pytest.mark.integration

_RECORDS = 20
_PARTITIONS = 2

Reports = list[tuple[str | None, list[tuple[int, int]]]]


def _committing_consumer(
    make_consumer: ConsumerFactory, impl: str, topic: str, group: str, asynchronous: bool
) -> tuple[Any, Reports, list[list[int]]]:
    """A consumer of ``topic`` whose ``on_revoke`` calls ``commit()`` without offsets, having
    consumed every record; what ``on_commit`` reported, and the revoked partitions per call."""
    reports: Reports = []
    revoked: list[list[int]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        reports.append((error and error.name(), [(tp.partition, tp.offset) for tp in partitions]))

    def on_revoke(consumer: Any, partitions: list[TopicPartition]) -> None:
        revoked.append(sorted(tp.partition for tp in partitions))
        result = consumer.commit(asynchronous=asynchronous)
        if result is not None:
            reports.append(("sync", [(tp.partition, tp.offset) for tp in result]))

    consumer = make_consumer(
        {
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "on_commit": on_commit,
        },
        impl=impl,
    )
    consumer.subscribe([topic], on_revoke=on_revoke)
    consumed = [0]

    def all_consumed() -> bool:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            consumed[0] += 1
        return consumed[0] == _RECORDS

    wait_until(all_consumed, CONVERGENCE_S, f"{impl}: {_RECORDS} records consumed")
    return consumer, reports, revoked


def _committed(make_consumer: ConsumerFactory, topic: str, group: str) -> list[int]:
    reader = make_consumer({"group.id": group}, impl=CONFLUENT)
    partitions = [TopicPartition(topic, p) for p in range(_PARTITIONS)]
    return [tp.offset for tp in reader.committed(partitions, timeout=10)]


@pytest.fixture
def topic(create_topic: Callable[..., str], kafka_bootstrap: str) -> str:
    name = create_topic(partitions=_PARTITIONS)
    produce_numbered(make_producer(kafka_bootstrap), name, 0, _RECORDS, _PARTITIONS)
    return name


@pytest.mark.parametrize("asynchronous", [True, False], ids=["async", "sync"])
@pytest.mark.parametrize("impl", [OURS, CONFLUENT])
def test_a_commit_in_on_revoke_on_unsubscribe_commits_the_revoked_partitions(
    make_consumer: ConsumerFactory,
    topic: str,
    unique_name: Callable[[str], str],
    impl: str,
    asynchronous: bool,
) -> None:
    group = unique_name("revoke-commit")
    consumer, reports, revoked = _committing_consumer(
        make_consumer, impl, topic, group, asynchronous
    )
    consumer.unsubscribe()
    wait_until(
        lambda: consumer.poll(0.1) is None and reports,
        CONVERGENCE_S,
        f"{impl}: on_revoke's commit reported",
        details=lambda: f"revoked {revoked}, reports {reports}",
    )
    expected = [(0, 10), (1, 10)]
    assert revoked == [[0, 1]]
    assert reports == [(None if asynchronous else "sync", expected)]
    assert _committed(make_consumer, topic, group) == [10, 10]


@pytest.mark.parametrize("impl", [OURS, CONFLUENT])
def test_a_commit_in_on_revoke_on_a_rebalance_commits_the_revoked_partition_too(
    make_consumer: ConsumerFactory, topic: str, unique_name: Callable[[str], str], impl: str
) -> None:
    group = unique_name("revoke-commit")
    first, reports, revoked = _committing_consumer(make_consumer, impl, topic, group, True)
    second = make_consumer({"group.id": group}, impl=impl)
    second.subscribe([topic])
    wait_until(
        lambda: (first.poll(0.05), second.poll(0.05)) and reports,
        CONVERGENCE_S,
        f"{impl}: on_revoke's commit reported after the second member joined",
        details=lambda: f"revoked {revoked}, reports {reports}",
    )
    assert len(revoked) == 1, revoked
    assert len(revoked[0]) == 1, f"one of the two partitions moves: {revoked}"
    assert reports == [(None, [(0, 10), (1, 10)])]
    assert _committed(make_consumer, topic, group) == [10, 10]
