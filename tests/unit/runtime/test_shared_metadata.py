"""Metadata shared by the members of one process: decoded once, parsed once, learned in O(topics).

The members of a process ask the same topics' metadata at the same moment (a cold join), each over
its own connection. The first to receive the answer decodes and parses it; the others get the same
immutable objects (``FrameCache``, ``ClusterClient.metadata``). ``StartOffsetLister`` keeps each
topic's partitions by reference instead of a key per partition.
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v13 import MetadataResponse
from kio.schema.metadata.v13.response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from consumer._runtime import cluster as cluster_module
from consumer._runtime.frame_cache import FrameCache
from consumer._runtime.start_offsets import StartOffsetLister
from consumer._wire import (
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    encode_response_frame,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer.member import TopicPartition

TOPIC_ID = uuid.uuid4()


def _metadata(leaders: dict[int, int]) -> MetadataResponse:
    partitions = tuple(
        MetadataResponsePartition(
            error_code=ErrorCode.none,
            partition_index=i32(index),
            leader_id=BrokerId(leader),
            leader_epoch=i32(0),
            replica_nodes=(BrokerId(leader),),
            isr_nodes=(BrokerId(leader),),
            offline_replicas=(),
        )
        for index, leader in leaders.items()
    )
    return MetadataResponse(
        throttle_time=i32_timedelta_from_ms(0),
        brokers=(MetadataResponseBroker(node_id=BrokerId(1), host="h", port=i32(9092)),),
        cluster_id="c",
        controller_id=BrokerId(1),
        topics=(
            MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName("orders"),
                topic_id=TOPIC_ID,
                partitions=partitions,
            ),
        ),
        error_code=ErrorCode.none,
    )


def _body(response: MetadataResponse, correlation_id: int) -> bytes:
    return encode_response_frame(response, correlation_id=correlation_id)[4:]


def test_connections_of_a_process_share_one_decoded_metadata_answer() -> None:
    answer = _metadata({index: 1 for index in range(900)})
    first, second = FrameCache(), FrameCache()  # two members' connections
    decoded = first.response(_body(answer, 7), MetadataResponse)
    assert decoded == answer
    assert second.response(_body(answer, 91), MetadataResponse) is decoded


def test_a_different_metadata_answer_is_decoded_anew() -> None:
    first, second = FrameCache(), FrameCache()
    before = first.response(_body(_metadata({0: 1, 1: 1}), 1), MetadataResponse)
    moved = _metadata({0: 1, 1: 2})
    after = second.response(_body(moved, 2), MetadataResponse)
    assert after is not before
    assert after == moved


def test_answers_arriving_interleaved_are_each_decoded_and_parsed_once() -> None:
    brokers_only, topic = _metadata({}), _metadata({0: 1, 1: 1})
    caches = [FrameCache() for _ in range(4)]
    seen = [
        cache.response(_body(answer, index), MetadataResponse)
        for index, cache in enumerate(caches)
        for answer in (brokers_only, topic)
    ]
    assert all(decoded is seen[0] for decoded in seen[0::2])
    assert all(decoded is seen[1] for decoded in seen[1::2])
    parsed = [cluster_module._parsed_metadata(decoded) for decoded in seen]
    assert all(snapshot is parsed[0] for snapshot in parsed[0::2])
    assert all(snapshot is parsed[1] for snapshot in parsed[1::2])


def test_one_response_object_is_parsed_once_into_an_immutable_snapshot() -> None:
    answer = _metadata({0: 1, 1: 1})
    snapshot = cluster_module._parsed_metadata(answer)
    assert cluster_module._parsed_metadata(answer) is snapshot
    assert cluster_module._parsed_metadata(_metadata({0: 1, 1: 1})) == snapshot
    (topic,) = snapshot.topics
    with pytest.raises(TypeError):
        topic.partitions[5] = PartitionMetadata(5, 1, 0)  # type: ignore[index]
    with pytest.raises(TypeError):
        snapshot.brokers[2] = snapshot.brokers[1]  # type: ignore[index]


def _snapshot(partitions: dict[int, PartitionMetadata]) -> ClusterMetadata:
    return ClusterMetadata(
        cluster_id="c",
        controller_id=1,
        brokers={},
        topics=(TopicMetadata("orders", TOPIC_ID, partitions),),
    )


def test_leaders_come_from_the_latest_answer_and_probes_since() -> None:
    lister = StartOffsetLister(cluster=None, request_timeout_ms=1_000)  # type: ignore[arg-type]
    p0, p1, p2 = (TopicPartition("orders", index) for index in range(3))
    lister.learn(
        _snapshot(
            {
                0: PartitionMetadata(0, 1, 0),
                1: PartitionMetadata(1, -1, 0),  # no leader now
            }
        )
    )
    assert [lister.leader_of(tp) for tp in (p0, p1, p2)] == [1, None, None]
    assert lister.leader_of(TopicPartition("other", 0)) is None
    lister._probed.update({p1: 2, p2: 3})  # brokers that answered for them (resolve())
    assert [lister.leader_of(tp) for tp in (p0, p1, p2)] == [1, 2, 3]
    # A newer answer tells for the partitions it names; p2 is not in it: its probe stays.
    lister.learn(_snapshot({0: PartitionMetadata(0, 2, 1), 1: PartitionMetadata(1, 1, 1)}))
    assert [lister.leader_of(tp) for tp in (p0, p1, p2)] == [2, 1, 3]
