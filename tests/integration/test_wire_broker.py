"""The wire layer and connection against a real Kafka 4.x broker.

Raw KIP-848 traffic: ApiVersions, Metadata, FindCoordinator, a ConsumerGroupHeartbeat join,
OffsetCommit/OffsetFetch with the member epoch, a fenced commit, a leave, and
ConsumerGroupDescribe to see the effect.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
import pytest_asyncio

from consumer._runtime.cluster import ClusterClient
from consumer._runtime.connection import BrokerConnection
from consumer._wire import (
    ApiKey,
    HeartbeatResult,
    NegotiatedVersions,
    OffsetCommitFields,
    OffsetFetchFields,
    OffsetToCommit,
    TopicPartition,
    build_consumer_group_describe_request,
    build_heartbeat_request,
    build_offset_commit_request,
    build_offset_fetch_request,
    parse_consumer_group_describe_response,
    parse_heartbeat_response,
    parse_offset_commit_response,
    parse_offset_fetch_response,
)
from consumer.errors import FencedMemberEpochError, StaleMemberEpochError
from consumer.member import LEAVE_EPOCH, HeartbeatRequest, TopicPartitions

pytestmark = pytest.mark.integration

JOIN_BOUND_S = 30.0


def new_member_id() -> str:
    """A client-generated member id, as KIP-1082 asks (22 chars of URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@pytest_asyncio.fixture
async def cluster(kafka_bootstrap: str) -> AsyncIterator[ClusterClient]:
    async with ClusterClient(kafka_bootstrap, request_timeout_ms=10_000) as client:
        yield client


@dataclass
class JoinedMember:
    group_id: str
    member_id: str
    topic: str
    topic_id: uuid.UUID
    epoch: int
    assignment: dict[uuid.UUID, frozenset[int]]


async def heartbeat(cluster: ClusterClient, fields: HeartbeatRequest) -> HeartbeatResult:
    def build(versions: NegotiatedVersions) -> object:
        return build_heartbeat_request(
            fields, versions.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        )

    response = await cluster.coordinator_request(fields.group_id, build)  # type: ignore[arg-type]
    return parse_heartbeat_response(response)


async def join_until_assigned(
    cluster: ClusterClient, topic: str, group_id: str, partitions: int
) -> JoinedMember:
    """Join with epoch 0, then heartbeat at the broker's interval until all partitions arrive."""
    snapshot = await cluster.metadata([topic])
    topic_id = snapshot.topic_ids_by_name()[topic]
    member_id = new_member_id()
    join = HeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=(topic,),
        topic_partitions=(),
    )
    result = await heartbeat(cluster, join)
    assert result.error is None, result.error
    assert result.member_epoch >= 1
    epoch = result.member_epoch
    owned: dict[uuid.UUID, frozenset[int]] = dict(result.assignment or {})

    async def converge() -> None:
        nonlocal epoch, owned, result
        while owned.get(topic_id, frozenset()) != frozenset(range(partitions)):
            # Wait for the broker's heartbeat interval: this is the protocol's own schedule.
            await asyncio.sleep(result.heartbeat_interval_ms / 1000)
            fields = HeartbeatRequest(
                group_id=group_id,
                member_id=member_id,
                member_epoch=epoch,
                topic_partitions=tuple(
                    TopicPartitions(owned_id, tuple(numbers)) for owned_id, numbers in owned.items()
                ),
            )
            result = await heartbeat(cluster, fields)
            assert result.error is None, result.error
            epoch = result.member_epoch
            if result.assignment is not None:
                owned = dict(result.assignment)

    await asyncio.wait_for(converge(), JOIN_BOUND_S)
    return JoinedMember(group_id, member_id, topic, topic_id, epoch, owned)


@pytest.mark.asyncio
async def test_api_versions_lists_consumer_group_heartbeat(kafka_bootstrap: str) -> None:
    host, port = kafka_bootstrap.rsplit(":", 1)
    async with BrokerConnection(host, int(port)) as connection:
        versions = connection.versions
        assert 68 in versions.broker_ranges
        assert versions.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 1
        assert versions.version_for(ApiKey.OFFSET_COMMIT) >= 9
        assert versions.version_for(ApiKey.API_VERSIONS) >= 3


@pytest.mark.asyncio
async def test_metadata_resolves_topic_id_and_name(
    cluster: ClusterClient, create_topic: Callable[..., str]
) -> None:
    topic = create_topic(partitions=3)
    by_name = await cluster.metadata([topic])
    topic_id = by_name.topic_ids_by_name()[topic]
    entry = by_name.topic(topic)
    assert entry is not None
    assert sorted(entry.partitions) == [0, 1, 2]

    by_id = await cluster.metadata([topic_id])
    assert by_id.topic_names_by_id() == {topic_id: topic}

    unknown = await cluster.metadata([uuid.uuid4()])
    (missing,) = unknown.topics
    assert missing.error is not None
    assert missing.error.name == "UNKNOWN_TOPIC_ID"


@pytest.mark.asyncio
async def test_find_coordinator_returns_the_broker(
    cluster: ClusterClient, unique_name: Callable[[str], str]
) -> None:
    coordinator = await cluster.find_coordinator(unique_name("group"))
    assert coordinator.node_id in cluster.brokers
    assert cluster.brokers[coordinator.node_id].port == coordinator.port


@pytest.mark.asyncio
async def test_heartbeat_join_receives_all_partitions(
    cluster: ClusterClient, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=3)
    member = await join_until_assigned(cluster, topic, unique_name("group"), partitions=3)
    assert member.epoch >= 1
    assert member.assignment == {member.topic_id: frozenset({0, 1, 2})}


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [9, 10])
async def test_commit_with_member_epoch_and_fetch_it_back(
    cluster: ClusterClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    version: int,
) -> None:
    topic = create_topic(partitions=3)
    member = await join_until_assigned(cluster, topic, unique_name("group"), partitions=3)
    connection = await cluster.coordinator_connection(member.group_id)
    if not connection.versions.supports(ApiKey.OFFSET_COMMIT, version):
        pytest.skip(f"broker does not offer OffsetCommit v{version}")
    offsets = [
        OffsetToCommit(topic, partition, 100 + partition, topic_id=member.topic_id)
        for partition in range(3)
    ]
    commit = OffsetCommitFields(member.group_id, member.member_id, member.epoch, offsets)
    response = await cluster.coordinator_request(
        member.group_id, build_offset_commit_request(commit, version)
    )
    names = {member.topic_id: topic}
    results = parse_offset_commit_response(response, topic_names_by_id=names)
    assert sorted((r.topic, r.partition, r.error) for r in results) == [
        (topic, 0, None),
        (topic, 1, None),
        (topic, 2, None),
    ]

    fetch = OffsetFetchFields(
        group_id=member.group_id,
        member_id=member.member_id,
        member_epoch=member.epoch,
        partitions=[TopicPartition(topic, p, member.topic_id) for p in range(3)],
    )
    fetched = parse_offset_fetch_response(
        await cluster.coordinator_request(
            member.group_id, build_offset_fetch_request(fetch, version)
        ),
        topic_names_by_id=names,
    )
    assert fetched.error is None
    assert sorted((o.topic, o.partition, o.offset, o.error) for o in fetched.offsets) == [
        (topic, 0, 100, None),
        (topic, 1, 101, None),
        (topic, 2, 102, None),
    ]


@pytest.mark.asyncio
async def test_commit_with_wrong_epoch_is_refused_with_a_typed_error(
    cluster: ClusterClient, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=3)
    member = await join_until_assigned(cluster, topic, unique_name("group"), partitions=3)
    commit = OffsetCommitFields(
        member.group_id,
        member.member_id,
        member.epoch + 5,
        [OffsetToCommit(topic, 0, 1, topic_id=member.topic_id)],
    )
    response = await cluster.coordinator_request(
        member.group_id, build_offset_commit_request(commit, 9)
    )
    (result,) = parse_offset_commit_response(response)
    assert isinstance(result.error, StaleMemberEpochError | FencedMemberEpochError), result.error
    assert not result.error.retriable


@pytest.mark.asyncio
async def test_leave_heartbeat_removes_the_member(
    cluster: ClusterClient, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=3)
    member = await join_until_assigned(cluster, topic, unique_name("group"), partitions=3)

    async def describe() -> object:
        def build(versions: NegotiatedVersions) -> object:
            version = versions.version_for(ApiKey.CONSUMER_GROUP_DESCRIBE)
            return build_consumer_group_describe_request(version, [member.group_id])

        response = await cluster.coordinator_request(member.group_id, build)  # type: ignore[arg-type]
        (group,) = parse_consumer_group_describe_response(response)
        assert group.error is None, group.error
        return group.member(member.member_id)

    described = await describe()
    assert described is not None
    assert described.member_epoch == member.epoch  # type: ignore[attr-defined]

    leave = HeartbeatRequest(
        group_id=member.group_id, member_id=member.member_id, member_epoch=LEAVE_EPOCH
    )
    result = await heartbeat(cluster, leave)
    assert result.error is None, result.error
    assert result.member_epoch == LEAVE_EPOCH
    assert await describe() is None
