"""GroupRequests: a lookup by id asked for while the join's lookup by name is in flight waits for
that answer instead of sending a second Metadata request of the same topics.

The join heartbeat's answer (the first assignment, by topic id) arrives before the name lookup's
on the same connection, so the member asks for the ids at once; a second Metadata request of a
900-partition topic cost the broker and the member another full answer to build and parse. The
cluster is a scripted stand-in for ClusterClient whose Metadata answers the test releases; the
real exchange is covered by tests/integration/test_first_assignment_metadata.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from consumer._runtime.group_requests import GroupRequests
from consumer._wire import ClusterMetadata, PartitionMetadata, TopicMetadata
from consumer.errors import KafkaConnectionError
from consumer.member import FetchMetadata, MetadataResolved

ORDERS_ID = uuid.UUID(int=1)
AUDIT_ID = uuid.UUID(int=2)
NAMES = {ORDERS_ID: "orders", AUDIT_ID: "audit"}


def _snapshot(*topic_ids: uuid.UUID) -> ClusterMetadata:
    partitions = {0: PartitionMetadata(0, 1, 0)}
    return ClusterMetadata(
        cluster_id="c",
        controller_id=1,
        brokers={},
        topics=tuple(TopicMetadata(NAMES[t], t, partitions) for t in topic_ids),
    )


class _Cluster:
    """Metadata requests are recorded and wait until the test answers them, in order."""

    def __init__(self) -> None:
        self.asked: list[list[str] | list[uuid.UUID]] = []
        self._answers: list[asyncio.Future[ClusterMetadata]] = []

    async def metadata(self, topics: Sequence[str] | Sequence[uuid.UUID]) -> ClusterMetadata:
        self.asked.append(list(topics))  # type: ignore[arg-type]
        answer: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_future()
        self._answers.append(answer)
        return await answer

    def answer(self, index: int, outcome: ClusterMetadata | Exception) -> None:
        if isinstance(outcome, Exception):
            self._answers[index].set_exception(outcome)
        else:
            self._answers[index].set_result(outcome)


async def _settle() -> None:
    """Let every ready task run until it waits again (a few loop iterations)."""
    for _ in range(5):
        await asyncio.sleep(0)


def _rig() -> tuple[GroupRequests, _Cluster]:
    cluster = _Cluster()
    return GroupRequests(cluster, "g", request_timeout_ms=1_000), cluster  # type: ignore[arg-type]


async def _id_lookup_during_name_lookup(
    *ids: uuid.UUID,
) -> tuple[GroupRequests, _Cluster, asyncio.Task[MetadataResolved], asyncio.Task[MetadataResolved]]:
    """The join's lookup of "orders" by name in flight, then a lookup of ``ids`` by id."""
    requests, cluster = _rig()
    by_name = asyncio.create_task(requests.resolve_names(("orders",)))
    await _settle()
    by_id = asyncio.create_task(requests.metadata(FetchMetadata(ids)))
    await _settle()
    return requests, cluster, by_name, by_id


def test_an_id_lookup_during_the_name_lookup_uses_its_answer_and_sends_nothing() -> None:
    async def scenario() -> None:
        requests, cluster, by_name, by_id = await _id_lookup_during_name_lookup(ORDERS_ID)
        assert cluster.asked == [["orders"]]  # the id lookup waits, it sent nothing
        assert not by_id.done()
        cluster.answer(0, _snapshot(ORDERS_ID))
        assert await by_id == MetadataResolved({ORDERS_ID: "orders"})
        assert await by_name == MetadataResolved({ORDERS_ID: "orders"})
        assert cluster.asked == [["orders"]]
        assert requests.topic_ids == {"orders": ORDERS_ID}

    asyncio.run(scenario())


def test_an_id_the_name_lookup_did_not_name_is_asked_for_after_it() -> None:
    async def scenario() -> None:
        requests, cluster, by_name, by_id = await _id_lookup_during_name_lookup(ORDERS_ID, AUDIT_ID)
        cluster.answer(0, _snapshot(ORDERS_ID))
        await _settle()
        assert cluster.asked == [["orders"], [ORDERS_ID, AUDIT_ID]]
        cluster.answer(1, _snapshot(ORDERS_ID, AUDIT_ID))
        assert await by_id == MetadataResolved(NAMES)
        await by_name

    asyncio.run(scenario())


def test_a_failed_name_lookup_lets_the_id_lookup_ask_by_id() -> None:
    async def scenario() -> None:
        requests, cluster, by_name, by_id = await _id_lookup_during_name_lookup(ORDERS_ID)
        cluster.answer(0, KafkaConnectionError("connection lost"))
        assert await by_name == MetadataResolved({})
        await _settle()
        assert cluster.asked == [["orders"], [ORDERS_ID]]
        cluster.answer(1, _snapshot(ORDERS_ID))
        assert await by_id == MetadataResolved({ORDERS_ID: "orders"})

    asyncio.run(scenario())


def test_without_a_name_lookup_in_flight_an_id_lookup_asks_by_id() -> None:
    async def scenario() -> None:
        requests, cluster = _rig()
        by_name = asyncio.create_task(requests.resolve_names(("orders",)))
        await _settle()
        cluster.answer(0, _snapshot(ORDERS_ID))
        await by_name
        by_id = asyncio.create_task(requests.metadata(FetchMetadata((ORDERS_ID,))))
        await _settle()
        assert cluster.asked == [["orders"], [ORDERS_ID]]  # an answered lookup is not reused
        cluster.answer(1, _snapshot(ORDERS_ID))
        assert await by_id == MetadataResolved({ORDERS_ID: "orders"})

    asyncio.run(scenario())


def test_a_cancelled_id_lookup_leaves_the_name_lookup_running() -> None:
    async def scenario() -> None:
        requests, cluster, by_name, by_id = await _id_lookup_during_name_lookup(ORDERS_ID)
        by_id.cancel()
        with pytest.raises(asyncio.CancelledError):
            await by_id
        cluster.answer(0, _snapshot(ORDERS_ID))
        assert await by_name == MetadataResolved({ORDERS_ID: "orders"})

    asyncio.run(scenario())


def test_a_cancelled_name_lookup_releases_the_id_lookup_which_asks_by_id() -> None:
    async def scenario() -> None:
        requests, cluster, by_name, by_id = await _id_lookup_during_name_lookup(ORDERS_ID)
        by_name.cancel()
        with pytest.raises(asyncio.CancelledError):
            await by_name
        await _settle()
        assert cluster.asked == [["orders"], [ORDERS_ID]]
        cluster.answer(1, _snapshot(ORDERS_ID))
        assert await by_id == MetadataResolved({ORDERS_ID: "orders"})

    asyncio.run(scenario())
