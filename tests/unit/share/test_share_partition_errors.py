"""Reactions to share partition errors and leader hints (sans-I/O)."""

from __future__ import annotations

import uuid

import pytest

from consumer.errors import error_for_code
from consumer.share.acknowledgements import TopicIdPartition
from consumer.share.partition_errors import (
    LeaderChange,
    PartitionAction,
    action_for_partition_error,
    leaders_after_hints,
)

P0 = TopicIdPartition(uuid.UUID(int=1), 0)
P1 = TopicIdPartition(uuid.UUID(int=1), 1)


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (6, PartitionAction.MOVE_TO_LEADER),  # NOT_LEADER_OR_FOLLOWER
        (74, PartitionAction.MOVE_TO_LEADER),  # FENCED_LEADER_EPOCH
        (3, PartitionAction.REFRESH_METADATA),  # UNKNOWN_TOPIC_OR_PARTITION
        (100, PartitionAction.REFRESH_METADATA),  # UNKNOWN_TOPIC_ID
        (29, PartitionAction.SURFACE),  # TOPIC_AUTHORIZATION_FAILED
        (2, PartitionAction.RECORD_ERROR),  # CORRUPT_MESSAGE
        (121, PartitionAction.FAIL_ACKNOWLEDGEMENTS),  # INVALID_RECORD_STATE
        (56, PartitionAction.RETRY),  # KAFKA_STORAGE_ERROR: retriable, not listed
        (-1, PartitionAction.SURFACE),  # UNKNOWN_SERVER_ERROR: not retriable
    ],
)
def test_each_error_has_its_action(code: int, action: PartitionAction) -> None:
    error = error_for_code(code)
    assert action_for_partition_error(error.name, retriable=error.retriable) is action


def test_known_hinted_leaders_replace_the_old_ones_and_others_need_metadata() -> None:
    leaders, unknown = leaders_after_hints(
        {P0: 1, P1: 1},
        [LeaderChange(P0, 2, 7), LeaderChange(P1, 9, 3)],
        known_nodes=[1, 2],
    )
    assert leaders == {P0: 2}
    assert unknown == {P1}
    leaders, unknown = leaders_after_hints({P0: 1}, [LeaderChange(P0, -1, -1)], [1])
    assert (leaders, unknown) == ({}, frozenset({P0}))
