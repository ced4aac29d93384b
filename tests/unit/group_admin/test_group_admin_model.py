"""The one shape of a described group: converters from the wire's results and confluent-kafka's
offsets, and the JSON schema every group type shares (every key present, null where absent)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from consumer._group_admin.model import (
    AssignedPartition,
    GroupDescription,
    GroupListing,
    MemberView,
    PartitionOffsets,
    committed_partitions,
    consumer_group_description,
    share_group_description,
    with_lag,
)
from consumer._wire import (
    DescribedGroup,
    DescribedMember,
    DescribedShareGroup,
    DescribedShareMember,
    SharePartitionOffset,
)

ORDERS = uuid.UUID("0b8c1d5e-2f3a-4b6c-8d9e-0f1a2b3c4d5e")
PAYMENTS = uuid.UUID("9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a")
NAMES = {ORDERS: "orders", PAYMENTS: "payments"}

DESCRIBE_KEYS = {
    "group",
    "type",
    "state",
    "group_epoch",
    "assignment_epoch",
    "assignor",
    "members",
    "partitions",
}
MEMBER_KEYS = {
    "member_id",
    "instance_id",
    "client_id",
    "host",
    "rack",
    "member_epoch",
    "assignment",
    "target_assignment",
}
PARTITION_KEYS = {"topic", "partition", "start_offset", "committed_offset", "leader_epoch", "lag"}


@dataclass(frozen=True)
class Committed:
    """What confluent-kafka's TopicPartition carries for a committed offset."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int | None = None


def _share_member(
    member_id: str, assignment: dict[uuid.UUID, frozenset[int]]
) -> DescribedShareMember:
    return DescribedShareMember(
        member_id=member_id,
        member_epoch=5,
        rack_id=None,
        client_id=f"client-{member_id}",
        client_host="/10.0.0.1",
        subscribed_topic_names=("orders", "payments"),
        assignment=assignment,
        topic_names_by_id=NAMES,
    )


def test_share_group_members_and_offsets_sorted_and_shaped() -> None:
    group = DescribedShareGroup(
        group_id="jobs",
        error=None,
        state="Stable",
        group_epoch=7,
        assignment_epoch=6,
        assignor_name="simple",
        members=(
            _share_member("m-2", {PAYMENTS: frozenset({0})}),
            _share_member("m-1", {ORDERS: frozenset({1, 0})}),
        ),
    )
    offsets = [
        SharePartitionOffset("payments", PAYMENTS, 0, 12, 0, None, None),
        SharePartitionOffset("orders", ORDERS, 1, 40, 2, 3, None),
        SharePartitionOffset("orders", ORDERS, 0, 41, 2, 0, None),
    ]
    described = share_group_description(group, offsets).to_json()
    assert set(described) == DESCRIBE_KEYS
    assert (described["type"], described["group_epoch"], described["assignment_epoch"]) == (
        "share",
        7,
        6,
    )
    assert [m["member_id"] for m in described["members"]] == ["m-1", "m-2"]
    first = described["members"][0]
    assert set(first) == MEMBER_KEYS
    assert first["assignment"] == [
        {"topic": "orders", "partition": 0},
        {"topic": "orders", "partition": 1},
    ]
    assert first["target_assignment"] is None
    assert first["instance_id"] is None
    assert first["host"] == "/10.0.0.1"
    assert [
        (p["topic"], p["partition"], p["start_offset"], p["lag"]) for p in described["partitions"]
    ] == [
        ("orders", 0, 41, 0),
        ("orders", 1, 40, 3),
        ("payments", 0, 12, None),
    ]
    assert all(set(p) == PARTITION_KEYS for p in described["partitions"])
    assert all(p["committed_offset"] is None for p in described["partitions"])


def test_consumer_group_has_targets_and_assigned_partitions_without_commits() -> None:
    member = DescribedMember(
        member_id="m-1",
        member_epoch=9,
        instance_id="static-1",
        rack_id="rack-a",
        client_id="c",
        client_host="/h",
        subscribed_topic_names=("orders",),
        subscribed_topic_regex=None,
        assignment={ORDERS: frozenset({0})},
        target_assignment={ORDERS: frozenset({0, 1})},
        topic_names_by_id=NAMES,
    )
    group = DescribedGroup("orders-app", None, "Reconciling", 10, 10, "uniform", (member,))
    committed = [Committed("orders", 0, 100, 3), Committed("orders", 2, -1001)]
    described = consumer_group_description(group, committed).to_json()
    (view,) = described["members"]
    assert view["target_assignment"] == [
        {"topic": "orders", "partition": 0},
        {"topic": "orders", "partition": 1},
    ]
    assert (view["instance_id"], view["rack"], view["member_epoch"]) == ("static-1", "rack-a", 9)
    # Partition 0 committed; partition 2 has no commit (-1001) and is not assigned: left out.
    assert described["partitions"] == [
        {
            "topic": "orders",
            "partition": 0,
            "start_offset": None,
            "committed_offset": 100,
            "leader_epoch": 3,
            "lag": None,
        }
    ]


def test_committed_partitions_list_assigned_partitions_with_no_commit_yet() -> None:
    view = MemberView(
        member_id="m",
        instance_id=None,
        client_id="c",
        host="h",
        rack=None,
        member_epoch=None,
        assignment=(AssignedPartition("t", 1), AssignedPartition("t", 0)),
        target_assignment=None,
    )
    rows = committed_partitions([view], [Committed("t", 1, 5)])
    assert [(r.partition, r.committed_offset) for r in rows] == [(0, None), (1, 5)]


def test_listing_json_has_the_four_keys() -> None:
    assert GroupListing("g", "streams", "Stable", None).to_json() == {
        "group": "g",
        "type": "streams",
        "state": "Stable",
        "members": None,
    }


def test_lag_is_the_end_offset_minus_the_committed_offset() -> None:
    description = GroupDescription(
        group="g",
        type="consumer",
        state="Stable",
        group_epoch=3,
        assignment_epoch=3,
        assignor="uniform",
        members=(),
        partitions=(
            PartitionOffsets("t", 0, committed_offset=10),
            PartitionOffsets("t", 1, committed_offset=7),  # no end offset read: lag unknown
            PartitionOffsets("t", 2),  # assigned, nothing committed: lag unknown
            PartitionOffsets("t", 3, committed_offset=9),  # end behind the commit (truncated)
        ),
    )
    lagged = with_lag(description, {("t", 0): 14, ("t", 2): 5, ("t", 3): 4})
    assert [p.lag for p in lagged.partitions] == [4, None, None, 0]
    share = replace(description, type="share")
    assert with_lag(share, {("t", 0): 14}) is share  # the broker reports share lag itself
