"""``kgm group watch``'s sans-I/O parts: the changes between two descriptions, the timeline
lines they make (read back by the testing kit), and the refresh loop on a scripted admin."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from consumer._group_admin.fetch import GroupNotFoundError
from consumer._group_admin.model import AssignedPartition, GroupDescription, MemberView
from consumer._group_admin.watch import TimelineLines, WatchOptions, group_changes, watch
from consumer.errors import CoordinatorLoadInProgressError
from consumer.testing import Timeline
from consumer.testing.timeline_events import EpochChange, Ownership, StateChange


def _p(*numbers: int) -> tuple[AssignedPartition, ...]:
    return tuple(AssignedPartition("t", n) for n in numbers)


def _member(
    member_id: str, epoch: int, owned: tuple[int, ...], target: tuple[int, ...]
) -> MemberView:
    return MemberView(member_id, None, "client", "/127.0.0.1", None, epoch, _p(*owned), _p(*target))


def _group(epoch: int, *members: MemberView, state: str = "Stable") -> GroupDescription:
    return GroupDescription("g", "consumer", state, epoch, epoch, "uniform", members, ())


# a joins alone; b joins (a still owns 0-3, target 0-1); a revokes; b leaves
ALONE = _group(1, _member("a", 1, (0, 1, 2, 3), (0, 1, 2, 3)))
B_JOINED = _group(
    2,
    _member("a", 2, (0, 1, 2, 3), (0, 1)),
    _member("b", 2, (), (2, 3)),
    state="Reconciling",
)
BALANCED = _group(2, _member("a", 2, (0, 1), (0, 1)), _member("b", 2, (2, 3), (2, 3)))
B_LEFT = _group(3, _member("a", 3, (0, 1, 2, 3), (0, 1, 2, 3)))


def test_changes_name_the_group_and_each_member() -> None:
    assert group_changes(None, None) == []
    assert group_changes(ALONE, None) == [{"change": "group_gone"}]
    first = group_changes(None, ALONE)
    assert [c["change"] for c in first] == ["group_appeared", "member_joined"]
    assert first[1]["assignment"] == ["t:0", "t:1", "t:2", "t:3"]
    joined = group_changes(ALONE, B_JOINED)
    assert joined == [
        {"change": "state", "from": "Stable", "to": "Reconciling"},
        {"change": "group_epoch", "from": 1, "to": 2},
        {"change": "assignment_epoch", "from": 1, "to": 2},
        {"change": "member_epoch", "member": "a", "from": 1, "to": 2},
        {
            "change": "target_assignment",
            "member": "a",
            "from": ["t:0", "t:1", "t:2", "t:3"],
            "to": ["t:0", "t:1"],
        },
        {
            "change": "member_joined",
            "member": "b",
            "client_id": "client",
            "instance_id": None,
            "member_epoch": 2,
            "assignment": [],
            "target_assignment": ["t:2", "t:3"],
        },
    ]
    assert group_changes(B_JOINED, B_JOINED) == []
    left = group_changes(BALANCED, B_LEFT)
    assert {"change": "member_left", "member": "b"} in left


def test_timeline_lines_are_read_back_by_the_testing_kit(tmp_path: Path) -> None:
    lines = TimelineLines()
    path = tmp_path / "watch.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for at_ms, description in enumerate([ALONE, B_JOINED, BALANCED, B_LEFT], start=1):
            for line in lines.next(description, at_ms * 1000):
                out.write(json.dumps(line) + "\n")
    timeline = Timeline()
    assert timeline.merge_jsonl(path) > 0
    events = timeline.events()
    states = [(e.member, e.state, e.at_ms) for e in events if isinstance(e, StateChange)]
    assert states == [
        ("a", "STABLE", 1000),
        ("a", "RECONCILE_ASSIGNMENT", 2000),  # owns more than its target
        ("b", "RECONCILE_ASSIGNMENT", 2000),
        ("a", "STABLE", 3000),
        ("b", "STABLE", 3000),
        ("b", "UNSUBSCRIBED", 4000),
    ]
    assert [(e.member, e.epoch) for e in events if isinstance(e, EpochChange)] == [("a", 3)]
    owned = sorted(
        (e.member, e.partition, e.owned_from_ms, e.owned_to_ms)
        for e in events
        if isinstance(e, Ownership)
    )
    assert owned == [
        ("a", 0, 1000, None),
        ("a", 1, 1000, None),
        ("a", 2, 1000, 3000),
        ("a", 2, 4000, None),
        ("a", 3, 1000, 3000),
        ("a", 3, 4000, None),
        ("b", 2, 3000, 4000),
        ("b", 3, 3000, 4000),
    ]


class ScriptedAdmin:
    """Answers describe_group from a list (None: the group does not exist)."""

    def __init__(self, answers: list[GroupDescription | None]) -> None:
        self.answers = answers
        self.calls = 0

    async def describe_group(self, group_id: str) -> GroupDescription:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if answer is None:
            raise GroupNotFoundError(group_id, "127.0.0.1:9092")
        return answer


def test_watch_prints_json_lines_on_change_only_and_stops_after_count() -> None:
    admin = ScriptedAdmin([None, ALONE, ALONE, BALANCED, BALANCED])
    out, record = io.StringIO(), io.StringIO()
    ticks = iter(range(0, 10_000, 100))
    options = WatchOptions(
        "g", interval_ms=1, output="json", timeout_ms=1000, count=5, record=record
    )
    changed = asyncio.run(watch(admin, options, out, clock_ms=lambda: next(ticks)))  # type: ignore[arg-type]
    assert admin.calls == 5
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert changed == len(printed) == 3  # absent, appeared, rebalanced
    assert printed[0] == {
        "at_ms": 100,
        "changes": [{"change": "group_absent"}],
        "description": None,
    }
    assert printed[1]["description"]["members"][0]["member_id"] == "a"
    assert [c["change"] for c in printed[2]["changes"]] == [
        "group_epoch",
        "assignment_epoch",
        "member_epoch",
        "assignment",
        "target_assignment",
        "member_joined",
    ]
    recorded = [json.loads(line) for line in record.getvalue().splitlines()]
    assert {line["type"] for line in recorded} == {"state", "assigned", "revoked", "epoch"}


def test_watch_stops_after_its_duration() -> None:
    admin = ScriptedAdmin([ALONE])
    now = [0]

    def clock_ms() -> int:
        now[0] += 400
        return now[0]

    options = WatchOptions("g", interval_ms=1, output="text", timeout_ms=1000, duration_ms=2_000)
    out = io.StringIO()
    asyncio.run(watch(admin, options, out, clock_ms=clock_ms))  # type: ignore[arg-type]
    # two clock reads per refresh (its stamp, the duration check): 400 ms a refresh pair
    assert admin.calls == 3
    assert out.getvalue().count("member_joined a") == 1


class FailingFirstAdmin(ScriptedAdmin):
    """The first refresh fails as on a fresh broker (the coordinator still loading)."""

    async def describe_group(self, group_id: str) -> GroupDescription:
        if self.calls == 0:
            self.calls += 1
            raise CoordinatorLoadInProgressError("the coordinator is loading")
        return await super().describe_group(group_id)


def test_a_failed_first_refresh_is_reported_and_the_next_one_is_the_first_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = FailingFirstAdmin([None, None])
    out = io.StringIO()
    options = WatchOptions("g", interval_ms=1, output="json", timeout_ms=1000, count=3)
    assert asyncio.run(watch(admin, options, out)) == 1  # type: ignore[arg-type]
    assert [json.loads(line)["changes"] for line in out.getvalue().splitlines()] == [
        [{"change": "group_absent"}]
    ]
    assert "refresh failed: CoordinatorLoadInProgressError" in capsys.readouterr().err
