"""Every request the wire layer builds, and every response it parses, round-trips through kio.

Round trip = encode with the kio schema, decode with the same schema, compare with the original
entity; and the same through a whole frame (size prefix + header + payload).
"""

from __future__ import annotations

import io
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    OffsetCommitFields,
    OffsetFetchFields,
    OffsetToCommit,
    TopicPartition,
    build_api_versions_request,
    build_consumer_group_describe_request,
    build_describe_share_group_offsets_request,
    build_find_coordinator_requests,
    build_heartbeat_request,
    build_list_groups_request,
    build_list_offsets_request,
    build_metadata_request,
    build_offset_commit_request,
    build_offset_fetch_request,
    build_share_acknowledge_request,
    build_share_fetch_request,
    build_share_group_describe_request,
    decode_request_frame,
    decode_response_frame,
    encode_request_frame,
    encode_response_frame,
    response_type_for,
)
from consumer._wire.share_heartbeat import build_share_heartbeat_request
from consumer.member import HeartbeatRequest, TopicPartitions
from consumer.share import ShareHeartbeatRequest
from consumer.share.acknowledgements import AcknowledgementBatch, AcknowledgeType

TOPIC_A = uuid.UUID("0b8c1d5e-2f3a-4b6c-8d9e-0f1a2b3c4d5e")
TOPIC_B = uuid.UUID("9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a")


def _heartbeat_fields() -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id="group-1",
        member_id="AAAAAAAAAAAAAAAAAAAAAA",
        member_epoch=7,
        instance_id="instance-1",
        rack_id="rack-a",
        rebalance_timeout_ms=300_000,
        subscribed_topic_names=("orders", "payments"),
        server_assignor="uniform",
        topic_partitions=(TopicPartitions(TOPIC_A, (2, 0, 1)), TopicPartitions(TOPIC_B, ())),
    )


def _commit_fields() -> OffsetCommitFields:
    return OffsetCommitFields(
        group_id="group-1",
        member_id="member-1",
        member_epoch=3,
        offsets=[
            OffsetToCommit("orders", 0, 42, topic_id=TOPIC_A, leader_epoch=1, metadata="m"),
            OffsetToCommit("orders", 1, 7, topic_id=TOPIC_A),
            OffsetToCommit("payments", 0, 0, topic_id=TOPIC_B, metadata=None),
        ],
    )


def _fetch_fields(partitions: bool) -> OffsetFetchFields:
    return OffsetFetchFields(
        group_id="group-1",
        member_id="member-1",
        member_epoch=3,
        partitions=[
            TopicPartition("orders", 0, TOPIC_A),
            TopicPartition("payments", 0, TOPIC_B),
            TopicPartition("orders", 1, TOPIC_A),
        ]
        if partitions
        else None,
    )


def _versions(api_key: ApiKey) -> range:
    supported = SUPPORTED_VERSIONS[api_key]
    return range(supported.min_version, supported.max_version + 1)


def _built_requests() -> list[tuple[str, RequestPayload]]:
    cases: list[tuple[str, RequestPayload]] = []
    for v in _versions(ApiKey.API_VERSIONS):
        cases.append((f"ApiVersions-v{v}", build_api_versions_request(v, software_version="1.2.3")))
    for v in _versions(ApiKey.METADATA):
        cases.append((f"Metadata-all-v{v}", build_metadata_request(v, None)))
        cases.append((f"Metadata-none-v{v}", build_metadata_request(v, [])))
        cases.append((f"Metadata-names-v{v}", build_metadata_request(v, ["orders", "payments"])))
        if v >= 12:
            cases.append((f"Metadata-ids-v{v}", build_metadata_request(v, [TOPIC_A, TOPIC_B])))
    for v in _versions(ApiKey.FIND_COORDINATOR):
        for index, request in enumerate(build_find_coordinator_requests(v, ["g1", "g2"])):
            cases.append((f"FindCoordinator-v{v}-{index}", request))
    for v in _versions(ApiKey.CONSUMER_GROUP_HEARTBEAT):
        cases.append((f"Heartbeat-full-v{v}", build_heartbeat_request(_heartbeat_fields(), v)))
        keepalive = HeartbeatRequest(group_id="g", member_id="m", member_epoch=9)
        cases.append((f"Heartbeat-keepalive-v{v}", build_heartbeat_request(keepalive, v)))
    regex = HeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_regex="orders-.*"
    )
    cases.append(("Heartbeat-regex-v1", build_heartbeat_request(regex, 1)))
    for v in _versions(ApiKey.OFFSET_COMMIT):
        cases.append((f"OffsetCommit-v{v}", build_offset_commit_request(_commit_fields(), v)))
    for v in _versions(ApiKey.OFFSET_FETCH):
        cases.append((f"OffsetFetch-v{v}", build_offset_fetch_request(_fetch_fields(True), v)))
        cases.append((f"OffsetFetch-all-v{v}", build_offset_fetch_request(_fetch_fields(False), v)))
    for v in _versions(ApiKey.LIST_OFFSETS):
        partitions = [("orders", 1), ("orders", 0), ("payments", 3)]
        earliest = build_list_offsets_request(v, partitions, timestamp=-2, read_committed=True)
        cases.append((f"ListOffsets-earliest-v{v}", earliest))
        latest = build_list_offsets_request(v, partitions, timestamp=-1, read_committed=False)
        cases.append((f"ListOffsets-latest-v{v}", latest))
    for v in _versions(ApiKey.CONSUMER_GROUP_DESCRIBE):
        cases.append((f"Describe-v{v}", build_consumer_group_describe_request(v, ["g1", "g2"])))
    for v in _versions(ApiKey.SHARE_GROUP_HEARTBEAT):
        join = ShareHeartbeatRequest("group-1", "AAAAAAAAAAAAAAAAAAAAAA", 0, "rack-a", ("a", "b"))
        cases.append((f"ShareHeartbeat-join-v{v}", build_share_heartbeat_request(join, v)))
        keepalive = ShareHeartbeatRequest(group_id="g", member_id="m", member_epoch=4)
        cases.append(
            (f"ShareHeartbeat-keepalive-v{v}", build_share_heartbeat_request(keepalive, v))
        )
    acks = {
        0: (
            AcknowledgementBatch(3, 5, (AcknowledgeType.ACCEPT,)),
            AcknowledgementBatch(8, 9, (AcknowledgeType.GAP, AcknowledgeType.REJECT)),
        ),
        2: (),
    }
    for v in _versions(ApiKey.SHARE_FETCH):
        share_fetch = build_share_fetch_request(
            v,
            group_id="g",
            member_id="m",
            share_session_epoch=4,
            max_wait_ms=500,
            min_bytes=1,
            max_records=500,
            batch_size=500,
            topics={TOPIC_A: acks, TOPIC_B: {0: ()}},
            forgotten={TOPIC_B: [1, 2]},
        )
        cases.append((f"ShareFetch-v{v}", share_fetch))
    for v in _versions(ApiKey.SHARE_ACKNOWLEDGE):
        share_ack = build_share_acknowledge_request(
            v, group_id="g", member_id="m", share_session_epoch=-1, topics={TOPIC_A: acks}
        )
        cases.append((f"ShareAcknowledge-v{v}", share_ack))
    for v in _versions(ApiKey.LIST_GROUPS):
        cases.append((f"ListGroups-all-v{v}", build_list_groups_request(v)))
        filtered = build_list_groups_request(v, types=["share"], states=["Stable"])
        cases.append((f"ListGroups-filtered-v{v}", filtered))
    for v in _versions(ApiKey.SHARE_GROUP_DESCRIBE):
        cases.append((f"ShareDescribe-v{v}", build_share_group_describe_request(v, ["g1", "g2"])))
    for v in _versions(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS):
        share_offsets = build_describe_share_group_offsets_request(v, ["g1", "g2"])
        cases.append((f"DescribeShareGroupOffsets-v{v}", share_offsets))
    return cases


BUILT_REQUESTS = _built_requests()


def _encode(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)  # type: ignore[type-var]
    return buffer.getvalue()


def test_every_api_and_version_we_support_is_built() -> None:
    built = {(int(r.__api_key__), int(r.__version__)) for _, r in BUILT_REQUESTS}
    expected = {(int(key), v) for key in SUPPORTED_VERSIONS for v in _versions(key)}
    assert built == expected


@pytest.mark.parametrize(
    ("case", "request_entity"), BUILT_REQUESTS, ids=[c for c, _ in BUILT_REQUESTS]
)
def test_built_request_round_trips_through_kio(case: str, request_entity: RequestPayload) -> None:
    data = _encode(request_entity)
    decoded, size = entity_reader(type(request_entity))(data, 0)  # type: ignore[type-var]
    assert size == len(data)
    assert decoded == request_entity


@pytest.mark.parametrize(
    ("case", "request_entity"), BUILT_REQUESTS, ids=[c for c, _ in BUILT_REQUESTS]
)
def test_built_request_round_trips_as_a_frame(case: str, request_entity: RequestPayload) -> None:
    frame = encode_request_frame(request_entity, correlation_id=1234, client_id="client-x")
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, decoded = decode_request_frame(frame[4:])
    assert decoded == request_entity
    assert header.correlation_id == 1234
    assert header.client_id == "client-x"
    assert header.request_api_key == request_entity.__api_key__
    assert header.request_api_version == request_entity.__version__
    # Flexible requests use request header v2, the others v1.
    assert type(header).__version__ == (2 if request_entity.__flexible__ else 1)


RESPONSE_TYPES = sorted(
    {response_type_for(type(r)) for _, r in BUILT_REQUESTS},
    key=lambda t: (t.__api_key__, t.__version__),
)


@pytest.mark.parametrize(
    "response_type", RESPONSE_TYPES, ids=[f"{t.__name__}-v{t.__version__}" for t in RESPONSE_TYPES]
)
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_parsed_response_round_trips_as_a_frame(
    response_type: type[ResponsePayload], data: st.DataObject
) -> None:
    response = data.draw(st.from_type(response_type))
    correlation_id = data.draw(st.integers(min_value=0, max_value=2**31 - 1))
    frame = encode_response_frame(response, correlation_id=correlation_id)
    header, decoded = decode_response_frame(frame[4:], response_type)
    assert header.correlation_id == correlation_id
    assert decoded == response


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    from kio.schema.api_versions.v3 import ApiVersionsResponse

    assert ApiVersionsResponse.__flexible__
    assert ApiVersionsResponse.__header_schema__.__version__ == 0
