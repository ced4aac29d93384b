"""What the builders put on the wire and what the parsers make of responses."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.api_versions import v0 as api_versions_v0
from kio.schema.api_versions import v3 as api_versions_v3
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v3.response import ApiVersion as ApiVersionV3
from kio.schema.consumer_group_heartbeat.v1 import ConsumerGroupHeartbeatResponse
from kio.schema.consumer_group_heartbeat.v1.response import Assignment, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6 import FindCoordinatorResponse
from kio.schema.find_coordinator.v6.response import Coordinator
from kio.schema.metadata.v13 import MetadataResponse
from kio.schema.metadata.v13.response import MetadataResponseBroker, MetadataResponseTopic
from kio.schema.offset_commit.v10 import OffsetCommitResponse
from kio.schema.offset_commit.v10.response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16, i32

from consumer._wire import (
    OffsetCommitFields,
    OffsetToCommit,
    build_find_coordinator_request,
    build_find_coordinator_requests,
    build_heartbeat_request,
    build_metadata_request,
    build_offset_commit_request,
    decode_api_versions_frame,
    encode_response_frame,
    offsets_version,
    parse_api_versions_response,
    parse_find_coordinator_response,
    parse_heartbeat_response,
    parse_metadata_response,
    parse_offset_commit_response,
    retry_version_after_unsupported,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer.errors import (
    FencedMemberEpochError,
    GroupAuthorizationFailedError,
    ProtocolError,
    StaleMemberEpochError,
    UnsupportedBrokerError,
    UnsupportedVersionError,
)
from consumer.member import HeartbeatRequest

TOPIC = uuid.UUID("0b8c1d5e-2f3a-4b6c-8d9e-0f1a2b3c4d5e")
ZERO_MS = i32_timedelta_from_ms(0)


def test_heartbeat_regex_at_v0_is_refused_locally() -> None:
    fields = HeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_regex="a.*"
    )
    with pytest.raises(UnsupportedBrokerError, match="regular expression"):
        build_heartbeat_request(fields, 0)
    assert build_heartbeat_request(fields, 1).subscribed_topic_regex == "a.*"


def test_heartbeat_join_carries_empty_owned_partitions_and_rebalance_timeout() -> None:
    fields = HeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=45_000,
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )
    request = build_heartbeat_request(fields, 1)
    assert request.topic_partitions == ()
    assert request.rebalance_timeout.total_seconds() == 45
    assert request.subscribed_topic_names == ("t",)


def test_heartbeat_keepalive_leaves_optional_fields_null() -> None:
    request = build_heartbeat_request(
        HeartbeatRequest(group_id="g", member_id="m", member_epoch=4), 1
    )
    assert request.topic_partitions is None
    assert request.subscribed_topic_names is None
    assert request.rebalance_timeout.total_seconds() * 1000 == -1


def test_heartbeat_rejects_unknown_version() -> None:
    with pytest.raises(ValueError, match="v2"):
        build_heartbeat_request(HeartbeatRequest(group_id="g", member_id="m", member_epoch=1), 2)


def _heartbeat_response(**changes: object) -> ConsumerGroupHeartbeatResponse:
    values: dict[str, object] = {
        "throttle_time": ZERO_MS,
        "error_code": ErrorCode.none,
        "member_id": "m",
        "member_epoch": i32(5),
        "heartbeat_interval": i32_timedelta_from_ms(500),
        "assignment": Assignment(
            topic_partitions=(TopicPartitions(topic_id=TOPIC, partitions=(i32(0), i32(2))),)
        ),
    }
    values.update(changes)
    return ConsumerGroupHeartbeatResponse(**values)  # type: ignore[arg-type]


def test_heartbeat_response_parses_assignment_and_interval() -> None:
    result = parse_heartbeat_response(_heartbeat_response())
    assert result.error is None
    assert result.member_epoch == 5
    assert result.heartbeat_interval_ms == 500
    assert result.assignment == {TOPIC: frozenset({0, 2})}


def test_heartbeat_response_without_assignment_means_unchanged() -> None:
    assert parse_heartbeat_response(_heartbeat_response(assignment=None)).assignment is None


def test_heartbeat_response_error_becomes_typed_error_with_broker_message() -> None:
    response = _heartbeat_response(
        error_code=ErrorCode.fenced_member_epoch, error_message="epoch 3 is fenced"
    )
    result = parse_heartbeat_response(response)
    assert isinstance(result.error, FencedMemberEpochError)
    assert result.error.broker_message == "epoch 3 is fenced"
    assert "epoch 3 is fenced" in str(result.error)


def test_parser_rejects_the_wrong_response_type() -> None:
    with pytest.raises(ProtocolError, match="ConsumerGroupHeartbeat"):
        parse_heartbeat_response(_metadata_response())


def test_find_coordinator_batches_from_v4_and_splits_below() -> None:
    assert len(build_find_coordinator_requests(4, ["a", "b", "c"])) == 1
    below = build_find_coordinator_requests(3, ["a", "b", "c"])
    assert [r.key for r in below] == ["a", "b", "c"]  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="at least one"):
        build_find_coordinator_requests(6, [])


def test_find_coordinator_single_key_at_every_version() -> None:
    for version in range(7):
        assert build_find_coordinator_request(version, "g").__version__ == version


def test_find_coordinator_parses_per_key_errors() -> None:
    response = FindCoordinatorResponse(
        throttle_time=ZERO_MS,
        coordinators=(
            Coordinator(
                key="g1",
                node_id=BrokerId(1),
                host="h",
                port=i32(9092),
                error_code=ErrorCode.none,
                error_message=None,
            ),
            Coordinator(
                key="g2",
                node_id=BrokerId(-1),
                host="",
                port=i32(-1),
                error_code=ErrorCode.group_authorization_failed,
                error_message=None,
            ),
        ),
    )
    first, second = parse_find_coordinator_response(response)
    assert (first.key, first.node_id, first.host, first.port, first.error) == (
        "g1",
        1,
        "h",
        9092,
        None,
    )
    assert isinstance(second.error, GroupAuthorizationFailedError)


def _metadata_response() -> MetadataResponse:
    return MetadataResponse(
        throttle_time=ZERO_MS,
        brokers=(MetadataResponseBroker(node_id=BrokerId(1), host="h", port=i32(9092)),),
        cluster_id="c",
        controller_id=BrokerId(1),
        topics=(
            MetadataResponseTopic(
                error_code=ErrorCode.none, name=TopicName("orders"), topic_id=TOPIC, partitions=()
            ),
            MetadataResponseTopic(
                error_code=ErrorCode.unknown_topic_id,
                name=None,
                topic_id=uuid.uuid4(),
                partitions=(),
            ),
        ),
        error_code=ErrorCode.none,
    )


def test_metadata_maps_ids_and_names_and_keeps_topic_errors() -> None:
    snapshot = parse_metadata_response(_metadata_response())
    assert snapshot.topic_ids_by_name() == {"orders": TOPIC}
    assert snapshot.topic_names_by_id() == {TOPIC: "orders"}
    assert snapshot.brokers[1].port == 9092
    failed = [t for t in snapshot.topics if t.error is not None]
    assert len(failed) == 1
    assert failed[0].error is not None
    assert failed[0].error.name == "UNKNOWN_TOPIC_ID"


def test_metadata_by_id_needs_v12() -> None:
    assert build_metadata_request(12, [TOPIC]).topics is not None
    with pytest.raises(UnsupportedBrokerError, match="v12"):
        build_metadata_request(11, [TOPIC])


@pytest.mark.parametrize(
    ("max_version", "ids", "expected"),
    [
        (10, [TOPIC, TOPIC], 10),
        (10, [TOPIC, None], 9),
        (9, [TOPIC], 9),
        (10, [], 10),
    ],
)
def test_offsets_version_uses_topic_ids_only_when_all_known(
    max_version: int, ids: list[uuid.UUID | None], expected: int
) -> None:
    assert offsets_version(max_version, ids) == expected


def test_offsets_version_below_nine_is_unsupported() -> None:
    with pytest.raises(UnsupportedBrokerError, match="v9"):
        offsets_version(8, [])


def test_offset_commit_v10_needs_every_topic_id() -> None:
    fields = OffsetCommitFields(
        group_id="g", member_id="m", member_epoch=1, offsets=[OffsetToCommit("t", 0, 5)]
    )
    with pytest.raises(ValueError, match="id of topic 't'"):
        build_offset_commit_request(fields, 10)
    assert build_offset_commit_request(fields, 9).topics[0].name == "t"  # type: ignore[union-attr]


def test_offset_commit_v10_response_gets_names_from_the_id_map() -> None:
    response = OffsetCommitResponse(
        throttle_time=ZERO_MS,
        topics=(
            OffsetCommitResponseTopic(
                topic_id=TOPIC,
                partitions=(
                    OffsetCommitResponsePartition(
                        partition_index=i32(0), error_code=ErrorCode.stale_member_epoch
                    ),
                ),
            ),
        ),
    )
    (result,) = parse_offset_commit_response(response, topic_names_by_id={TOPIC: "orders"})
    assert result.topic == "orders"
    assert isinstance(result.error, StaleMemberEpochError)


def test_api_versions_unsupported_reply_is_decoded_as_v0_and_names_a_retry_version() -> None:
    refusal = api_versions_v0.ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version,
        api_keys=(ApiVersionV0(api_key=i16(18), min_version=i16(0), max_version=i16(2)),),
    )
    frame = encode_response_frame(refusal, correlation_id=9)[4:]
    decoded = decode_api_versions_frame(frame, requested_version=4)
    assert decoded == refusal
    assert retry_version_after_unsupported(decoded) == 2
    with pytest.raises(UnsupportedVersionError):
        parse_api_versions_response(decoded)


def test_api_versions_success_lists_ranges() -> None:
    response = api_versions_v3.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(ApiVersionV3(api_key=i16(68), min_version=i16(0), max_version=i16(1)),),
        throttle_time=ZERO_MS,
    )
    frame = encode_response_frame(response, correlation_id=1)[4:]
    decoded = decode_api_versions_frame(frame, requested_version=3)
    assert retry_version_after_unsupported(decoded) is None
    ranges = parse_api_versions_response(decoded)
    assert (ranges[68].min_version, ranges[68].max_version) == (0, 1)
