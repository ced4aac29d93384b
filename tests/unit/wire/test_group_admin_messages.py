"""Parsing ListGroups v5, ShareGroupDescribe v1 and DescribeShareGroupOffsets v0/v1 responses
built with kio: typed results, per-group errors, the lag only where the broker reports it."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.describe_share_group_offsets import v0 as offsets_v0
from kio.schema.describe_share_group_offsets import v1 as offsets_v1
from kio.schema.describe_share_group_offsets.v0 import response as offsets_response_v0
from kio.schema.describe_share_group_offsets.v1 import response as offsets_response_v1
from kio.schema.errors import ErrorCode
from kio.schema.list_groups import v5 as list_v5
from kio.schema.list_groups.v5.response import ListedGroup as KioListedGroup
from kio.schema.share_group_describe.v1 import response as describe_v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from consumer._wire import (
    ListedGroup,
    parse_describe_share_group_offsets_response,
    parse_list_groups_response,
    parse_share_group_describe_response,
)
from consumer.errors import CoordinatorLoadInProgressError, GroupIdNotFoundError, ProtocolError

TOPIC = uuid.UUID("0b8c1d5e-2f3a-4b6c-8d9e-0f1a2b3c4d5e")
NO_THROTTLE = datetime.timedelta(0)


def _listed(group_id: str, group_type: str, state: str) -> KioListedGroup:
    return KioListedGroup(
        group_id=GroupId(group_id),
        protocol_type=group_type,
        group_state=state,
        group_type=group_type,
    )


def test_list_groups_keeps_type_and_state_as_the_broker_spells_them() -> None:
    response = list_v5.ListGroupsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=(_listed("orders", "consumer", "Stable"), _listed("jobs", "share", "Empty")),
    )
    assert parse_list_groups_response(response) == [
        ListedGroup("orders", "consumer", "Stable", "consumer"),
        ListedGroup("jobs", "share", "Empty", "share"),
    ]


def test_list_groups_error_is_raised_as_its_type() -> None:
    response = list_v5.ListGroupsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.coordinator_load_in_progress, groups=()
    )
    with pytest.raises(CoordinatorLoadInProgressError):
        parse_list_groups_response(response)
    with pytest.raises(ProtocolError, match="ListGroups v5"):
        parse_list_groups_response(
            offsets_v1.DescribeShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, groups=())
        )


def _member(
    member_id: str, topic_id: uuid.UUID | None, partitions: tuple[int, ...]
) -> describe_v1.Member:
    return describe_v1.Member(
        member_id=member_id,
        rack_id="rack-a",
        member_epoch=i32(4),
        client_id="client-1",
        client_host="/127.0.0.1",
        subscribed_topic_names=(TopicName("orders"),),
        assignment=describe_v1.Assignment(
            topic_partitions=(
                describe_v1.TopicPartitions(
                    topic_id=topic_id,
                    topic_name=TopicName("orders"),
                    partitions=tuple(i32(p) for p in partitions),
                ),
            )
        ),
    )


def _described(
    error: ErrorCode, members: tuple[describe_v1.Member, ...]
) -> describe_v1.ShareGroupDescribeResponse:
    return describe_v1.ShareGroupDescribeResponse(
        throttle_time=NO_THROTTLE,
        groups=(
            describe_v1.DescribedGroup(
                error_code=error,
                error_message=None if error == ErrorCode.none else "Group jobs not found.",
                group_id=GroupId("jobs"),
                group_state="Stable" if error == ErrorCode.none else "",
                group_epoch=i32(6),
                assignment_epoch=i32(5),
                assignor_name="simple",
                members=members,
            ),
        ),
    )


def test_share_group_describe_gives_members_with_assignments_by_topic_id() -> None:
    (group,) = parse_share_group_describe_response(
        _described(ErrorCode.none, (_member("m-1", TOPIC, (1, 0)),))
    )
    assert group.error is None
    assert (group.state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "Stable",
        6,
        5,
        "simple",
    )
    (member,) = group.members
    assert member.member_id == "m-1"
    assert (member.rack_id, member.client_id, member.client_host) == (
        "rack-a",
        "client-1",
        "/127.0.0.1",
    )
    assert member.member_epoch == 4
    assert member.assignment == {TOPIC: frozenset({0, 1})}
    assert member.topic_names_by_id == {TOPIC: "orders"}


def test_share_group_describe_returns_a_group_error_and_refuses_a_topic_without_id() -> None:
    (group,) = parse_share_group_describe_response(_described(ErrorCode.group_id_not_found, ()))
    assert isinstance(group.error, GroupIdNotFoundError)
    assert "Group jobs not found" in str(group.error)
    with pytest.raises(ProtocolError, match="without an id"):
        parse_share_group_describe_response(
            _described(ErrorCode.none, (_member("m-1", None, (0,)),))
        )


def _offsets_v1(
    lag: int, error: ErrorCode = ErrorCode.none
) -> offsets_v1.DescribeShareGroupOffsetsResponse:
    partition = offsets_response_v1.DescribeShareGroupOffsetsResponsePartition(
        partition_index=i32(2),
        start_offset=i64(40),
        leader_epoch=i32(1),
        lag=i64(lag),
        error_code=error,
    )
    topic = offsets_response_v1.DescribeShareGroupOffsetsResponseTopic(
        topic_name=TopicName("orders"), topic_id=TOPIC, partitions=(partition,)
    )
    return offsets_v1.DescribeShareGroupOffsetsResponse(
        throttle_time=NO_THROTTLE,
        groups=(
            offsets_response_v1.DescribeShareGroupOffsetsResponseGroup(
                group_id=GroupId("jobs"), topics=(topic,), error_code=ErrorCode.none
            ),
        ),
    )


def test_share_group_offsets_v1_report_the_lag_and_minus_one_means_unknown() -> None:
    (group,) = parse_describe_share_group_offsets_response(_offsets_v1(7))
    assert group.error is None
    (partition,) = group.partitions
    assert (partition.topic, partition.topic_id, partition.partition) == ("orders", TOPIC, 2)
    assert (partition.start_offset, partition.leader_epoch, partition.lag) == (40, 1, 7)
    (unknown,) = parse_describe_share_group_offsets_response(_offsets_v1(-1))[0].partitions
    assert unknown.lag is None
    (failed,) = parse_describe_share_group_offsets_response(
        _offsets_v1(0, ErrorCode.unknown_topic_or_partition)
    )[0].partitions
    assert failed.error is not None
    assert failed.error.code == ErrorCode.unknown_topic_or_partition


def test_share_group_offsets_v0_have_no_lag() -> None:
    partition = offsets_response_v0.DescribeShareGroupOffsetsResponsePartition(
        partition_index=i32(0), start_offset=i64(3), leader_epoch=i32(0), error_code=ErrorCode.none
    )
    topic = offsets_response_v0.DescribeShareGroupOffsetsResponseTopic(
        topic_name=TopicName("orders"), topic_id=TOPIC, partitions=(partition,)
    )
    response = offsets_v0.DescribeShareGroupOffsetsResponse(
        throttle_time=NO_THROTTLE,
        groups=(
            offsets_response_v0.DescribeShareGroupOffsetsResponseGroup(
                group_id=GroupId("jobs"), topics=(topic,), error_code=ErrorCode.none
            ),
        ),
    )
    (group,) = parse_describe_share_group_offsets_response(response)
    assert [(p.start_offset, p.lag) for p in group.partitions] == [(3, None)]
