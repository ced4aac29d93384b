"""GroupRequests.list_start_offsets: one ListOffsets per leader, concurrently; a moved leader or
a failed request is asked again after fresh metadata, within the request timeout; what is still
missing then is left out (the data plane falls back to the logical offset).

The cluster is a scripted stand-in for ClusterClient (metadata and per-broker connections): the
real exchange is covered by tests/integration/test_start_offsets_listed.py.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v10 import ListOffsetsResponse
from kio.schema.list_offsets.v10.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta, i64

from consumer._runtime.group_requests import GroupRequests
from consumer._wire import (
    SUPPORTED_VERSIONS,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    negotiate_versions,
)
from consumer.errors import KafkaConnectionError
from consumer.member import ListStartOffsets, ResetPolicy, TopicPartition

P0, P1, P2 = (TopicPartition("orders", p) for p in range(3))
#: Answer per partition index: an offset, or an error code.
Answer = Callable[[int], int | ErrorCode]


class _Connection:
    def __init__(self, cluster: _Cluster, node_id: int) -> None:
        self.node_id = node_id
        self.cluster = cluster
        ranges = {int(key): r for key, r in SUPPORTED_VERSIONS.items()}
        self.versions = negotiate_versions(ranges)

    async def request(self, payload: Any, *, timeout_ms: int | None = None) -> Any:
        self.cluster.sent.append((self.node_id, payload))
        await asyncio.sleep(0)
        answer = self.cluster.answers.get(self.node_id)
        if answer is None:
            raise KafkaConnectionError(f"broker {self.node_id} is gone")
        partitions = []
        for topic in payload.topics:
            for partition in topic.partitions:
                result = answer(int(partition.partition_index))
                if isinstance(result, ErrorCode):
                    entry = ListOffsetsPartitionResponse(
                        partition_index=partition.partition_index, error_code=result
                    )
                else:
                    entry = ListOffsetsPartitionResponse(
                        partition_index=partition.partition_index,
                        error_code=ErrorCode.none,
                        offset=i64(result),
                    )
                partitions.append(entry)
        return ListOffsetsResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            topics=(
                ListOffsetsTopicResponse(name=TopicName("orders"), partitions=tuple(partitions)),
            ),
        )


class _Cluster:
    """Leaders per partition (changeable between metadata answers) and each broker's answer.

    Four brokers by default: more than GroupRequests asks all at once, so unknown leaders are
    looked up with Metadata; ``brokers=(1, 2)`` makes it ask both instead.
    """

    def __init__(
        self,
        leaders: dict[int, int],
        answers: dict[int, Answer | None],
        brokers: tuple[int, ...] = (1, 2, 3, 4),
    ) -> None:
        self.leaders = leaders
        self.answers = answers
        self.brokers = dict.fromkeys(brokers)
        self.metadata_calls = 0
        self.sent: list[tuple[int, Any]] = []

    async def metadata(self, topics: Any = None) -> ClusterMetadata:
        self.metadata_calls += 1
        partitions = {
            index: PartitionMetadata(index, leader, 0) for index, leader in self.leaders.items()
        }
        return ClusterMetadata(
            cluster_id="c",
            controller_id=1,
            brokers={},
            topics=(TopicMetadata("orders", None, partitions),),
        )

    async def connection_to(self, node_id: int) -> _Connection:
        return _Connection(self, node_id)


def _list(cluster: _Cluster, *partitions: TopicPartition, timeout_ms: int = 2_000) -> Any:
    requests = GroupRequests(cluster, "g", request_timeout_ms=timeout_ms)  # type: ignore[arg-type]
    command = ListStartOffsets(7, partitions, ResetPolicy.EARLIEST, read_committed=True)
    return asyncio.run(requests.list_start_offsets(command))


def test_one_request_per_leader_with_the_policy_timestamp_and_isolation() -> None:
    cluster = _Cluster({0: 1, 1: 2, 2: 1}, {1: lambda p: 10 + p, 2: lambda p: 20 + p})
    listed = _list(cluster, P0, P1, P2)
    assert listed.request_id == 7
    assert listed.offsets == {P0: 10, P1: 21, P2: 12}
    assert sorted(node for node, _ in cluster.sent) == [1, 2]
    for _, request in cluster.sent:
        assert request.isolation_level == 1
        assert {int(p.timestamp) for t in request.topics for p in t.partitions} == {-2}
    assert cluster.metadata_calls == 1


def test_a_moved_leader_is_asked_again_after_fresh_metadata() -> None:
    cluster = _Cluster({0: 1, 1: 2}, {1: lambda p: 5, 2: None})

    def not_leader(partition: int) -> int | ErrorCode:
        cluster.leaders[1] = 1  # the next metadata names broker 1
        return ErrorCode.not_leader_or_follower

    cluster.answers[2] = not_leader
    listed = _list(cluster, P0, P1)
    assert listed.offsets == {P0: 5, P1: 5}
    assert cluster.metadata_calls == 2
    assert [node for node, _ in cluster.sent].count(2) == 1


def test_a_broker_that_stays_unreachable_is_given_up_on_at_the_request_timeout() -> None:
    cluster = _Cluster({0: 1, 1: 2}, {1: lambda p: 3, 2: None})
    listed = _list(cluster, P0, P1, timeout_ms=400)
    assert listed.offsets == {P0: 3}  # P1 falls back to the logical offset
    assert [node for node, _ in cluster.sent].count(2) >= 2  # retried before giving up


@pytest.mark.parametrize("error", [ErrorCode.topic_authorization_failed])
def test_a_non_retriable_error_drops_the_partition_at_once(error: ErrorCode) -> None:
    cluster = _Cluster({0: 1}, {1: lambda p: error})
    listed = _list(cluster, P0)
    assert listed.offsets == {}
    assert len(cluster.sent) == 1


def test_unknown_leaders_of_a_small_cluster_are_asked_of_every_broker_without_metadata() -> None:
    leaders = {0: 1, 1: 2}

    def answer_as(node: int) -> Answer:
        return lambda p: 30 + p if leaders[p] == node else ErrorCode.not_leader_or_follower

    cluster = _Cluster(leaders, {1: answer_as(1), 2: answer_as(2)}, brokers=(1, 2))
    requests = GroupRequests(cluster, "g", request_timeout_ms=2_000)  # type: ignore[arg-type]
    command = ListStartOffsets(1, (P0, P1), ResetPolicy.LATEST, read_committed=False)
    listed = asyncio.run(requests.list_start_offsets(command))
    assert listed.offsets == {P0: 30, P1: 31}
    assert cluster.metadata_calls == 0
    assert sorted(node for node, _ in cluster.sent) == [1, 2]
    # The answers taught the leaders: the next lookup asks each leader only for its own.
    cluster.sent.clear()
    command = ListStartOffsets(2, (P0, P1), ResetPolicy.LATEST, read_committed=False)
    again = asyncio.run(requests.list_start_offsets(command))
    assert again.offsets == {P0: 30, P1: 31}
    assert sorted(
        (node, [int(p.partition_index) for t in r.topics for p in t.partitions])
        for node, r in cluster.sent
    ) == [(1, [0]), (2, [1])]
    assert cluster.metadata_calls == 0
