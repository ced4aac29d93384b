"""Text output of ``kgm group``: aligned columns, ``-`` for what a group type lacks, the
partition columns of the group's type."""

from __future__ import annotations

import json

from consumer._group_admin.model import (
    AssignedPartition,
    GroupDescription,
    GroupListing,
    MemberView,
    PartitionOffsets,
)
from consumer._group_admin.render import (
    describe_json,
    describe_text,
    format_assignment,
    list_json,
    list_text,
    table,
)


def test_table_aligns_columns_and_shows_none_as_dash() -> None:
    assert table(("A", "LONGER"), [("x", None), ("yyyy", 7)]).splitlines() == [
        "A     LONGER",
        "x     -",
        "yyyy  7",
    ]


def test_assignment_is_grouped_by_topic() -> None:
    partitions = [AssignedPartition("b", 3), AssignedPartition("a", 1), AssignedPartition("a", 0)]
    assert format_assignment(partitions) == "a:0,1 b:3"
    assert format_assignment([]) == ""
    assert format_assignment(None) is None


def test_list_text_and_json() -> None:
    listings = [
        GroupListing("jobs", "share", "Stable", 2),
        GroupListing("s", "streams", "Empty", None),
    ]
    assert list_text(listings).splitlines() == [
        "GROUP  TYPE     STATE   MEMBERS",
        "jobs   share    Stable  2",
        "s      streams  Empty   -",
    ]
    assert list_text([]) == "no groups"
    assert json.loads(list_json(listings))[1] == {
        "group": "s",
        "type": "streams",
        "state": "Empty",
        "members": None,
    }


def _member(**changes: object) -> MemberView:
    fields: dict[str, object] = {
        "member_id": "m-1",
        "instance_id": None,
        "client_id": "c1",
        "host": "/127.0.0.1",
        "rack": None,
        "member_epoch": 4,
        "assignment": (AssignedPartition("t", 0),),
        "target_assignment": None,
    }
    fields.update(changes)
    return MemberView(**fields)  # type: ignore[arg-type]


def test_share_description_text_has_start_offsets_and_lag() -> None:
    description = GroupDescription(
        group="jobs",
        type="share",
        state="Stable",
        group_epoch=3,
        assignment_epoch=3,
        assignor="simple",
        members=(_member(),),
        partitions=(PartitionOffsets("t", 0, start_offset=10, leader_epoch=0, lag=2),),
    )
    lines = describe_text(description).splitlines()
    assert lines[0] == (
        "GROUP jobs  TYPE share  STATE Stable  GROUP-EPOCH 3  ASSIGNMENT-EPOCH 3  ASSIGNOR simple"
    )
    assert lines[2].split() == [
        "MEMBER-ID",
        "INSTANCE-ID",
        "CLIENT-ID",
        "HOST",
        "RACK",
        "EPOCH",
        "ASSIGNMENT",
        "TARGET-ASSIGNMENT",
    ]
    assert lines[3].split() == ["m-1", "-", "c1", "/127.0.0.1", "-", "4", "t:0", "-"]
    assert lines[5].split() == ["TOPIC", "PARTITION", "START-OFFSET", "LEADER-EPOCH", "LAG"]
    assert lines[6].split() == ["t", "0", "10", "0", "2"]
    assert json.loads(describe_json(description))["partitions"][0]["lag"] == 2


def test_classic_description_text_has_commits_and_no_epochs() -> None:
    description = GroupDescription(
        group="old",
        type="classic",
        state="Stable",
        group_epoch=None,
        assignment_epoch=None,
        assignor="range",
        members=(_member(member_epoch=None, assignment=()),),
        partitions=(
            PartitionOffsets("t", 0, committed_offset=5, lag=3),
            PartitionOffsets("t", 1),
        ),
    )
    lines = describe_text(description).splitlines()
    assert "GROUP-EPOCH -  ASSIGNMENT-EPOCH -" in lines[0]
    assert lines[3].split()[5:] == ["-", "-", "-"]  # epoch, assignment, target
    assert lines[5].split() == ["TOPIC", "PARTITION", "COMMITTED-OFFSET", "LEADER-EPOCH", "LAG"]
    assert lines[6].split() == ["t", "0", "5", "-", "3"]
    assert lines[7].split() == ["t", "1", "-", "-", "-"]


def test_undescribed_type_and_empty_group_say_so() -> None:
    streams = GroupDescription("s", "streams", "Empty", None, None, None, None, ())
    text = describe_text(streams)
    assert "members: not described for streams groups" in text
    assert "no partition offsets" in text
    assert json.loads(describe_json(streams))["members"] is None
    empty = GroupDescription("e", "consumer", "Empty", 2, 2, "uniform", (), ())
    assert "no members" in describe_text(empty)
