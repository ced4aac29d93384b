"""``kgm group watch GROUP``: describe a group again and again, and say what changed.

The sans-I/O part is :func:`group_changes` (two descriptions in, the changes out) and
:class:`TimelineLines` (the same as a rebalance timeline of the testing kit: JSON lines that
``consumer.testing.Timeline.merge_jsonl`` reads and ``kgm timeline plot`` draws). The command
itself (:func:`watch`) refreshes on an interval until ``--count`` refreshes, ``--duration`` or
Ctrl-C.

A member's state in the timeline is the coordinator's view: ``STABLE`` when its assignment equals
its target, ``RECONCILE_ASSIGNMENT`` while it does not, ``UNSUBSCRIBED`` once it is gone from the
group. Its partitions are owned from the refresh that first showed them in its assignment.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

from confluent_kafka import KafkaException

from consumer.errors import ConsumerError

from .fetch import GroupAdmin, GroupNotFoundError
from .model import AssignedPartition, GroupDescription, MemberView
from .render import describe_text

__all__ = ["TimelineLines", "WatchOptions", "group_changes", "watch"]

_CLEAR_SCREEN: Final = "\x1b[H\x1b[2J"
#: What a failed refresh returns (a description that is never shown).
_FAILED: Final = GroupDescription("", "", "", None, None, None, None, ())
#: How many recent changes the terminal view keeps under the description.
_RECENT_CHANGES: Final = 12


def wall_clock_ms() -> int:
    """Wall-clock milliseconds: the testing kit's timelines use the same clock."""
    return time.time_ns() // 1_000_000


def _names(partitions: tuple[AssignedPartition, ...] | None) -> list[str] | None:
    return None if partitions is None else [f"{p.topic}:{p.partition}" for p in partitions]


def group_changes(
    before: GroupDescription | None, after: GroupDescription | None
) -> list[dict[str, Any]]:
    """What differs from ``before`` to ``after`` (None: the group does not exist), as
    ``{"change": KIND, ...}`` dicts in a stable order: the group first, then members by id.

    Kinds: ``group_appeared``, ``group_gone``, ``state``, ``group_epoch``, ``assignment_epoch``
    (with ``from`` and ``to``); ``member_joined`` (with its epoch, assignment and target) and
    ``member_left``; ``member_epoch``, ``assignment``, ``target_assignment`` (with ``member``,
    ``from`` and ``to``; assignments as ``"topic:partition"`` lists).
    """
    if before is None and after is None:
        return []
    if after is None:
        return [{"change": "group_gone"}]
    changes: list[dict[str, Any]] = []
    if before is None:
        changes.append({"change": "group_appeared", "type": after.type, "state": after.state})
        before_members: dict[str, MemberView] = {}
    else:
        for key in ("state", "group_epoch", "assignment_epoch"):
            old, new = getattr(before, key), getattr(after, key)
            if old != new:
                changes.append({"change": key, "from": old, "to": new})
        before_members = {m.member_id: m for m in before.members or ()}
    after_members = {m.member_id: m for m in after.members or ()}
    for member_id in sorted(before_members.keys() | after_members.keys()):
        old_member, new_member = before_members.get(member_id), after_members.get(member_id)
        if new_member is None:
            changes.append({"change": "member_left", "member": member_id})
        elif old_member is None:
            changes.append(
                {
                    "change": "member_joined",
                    "member": member_id,
                    "client_id": new_member.client_id,
                    "instance_id": new_member.instance_id,
                    "member_epoch": new_member.member_epoch,
                    "assignment": _names(new_member.assignment),
                    "target_assignment": _names(new_member.target_assignment),
                }
            )
        else:
            for key in ("member_epoch", "assignment", "target_assignment"):
                old, new = getattr(old_member, key), getattr(new_member, key)
                if old != new:
                    if key != "member_epoch":
                        old, new = _names(old), _names(new)
                    changes.append({"change": key, "member": member_id, "from": old, "to": new})
    return changes


def _coordinator_state(member: MemberView) -> str:
    target = member.target_assignment
    if target is None or tuple(target) == tuple(member.assignment):
        return "STABLE"
    return "RECONCILE_ASSIGNMENT"


@dataclass
class TimelineLines:
    """Turns successive descriptions into the testing kit's timeline events (JSON lines).

    ``state``, ``epoch``, ``assigned`` and ``revoked`` lines, one per member and partition; the
    member is named by its member id.
    """

    _before: GroupDescription | None = None

    def next(self, after: GroupDescription | None, at_ms: int) -> list[dict[str, Any]]:
        """The events between the previous description and ``after``, stamped ``at_ms``."""
        before_members = {m.member_id: m for m in (self._before and self._before.members) or ()}
        after_members = {m.member_id: m for m in (after and after.members) or ()}
        self._before = after
        lines: list[dict[str, Any]] = []
        for member_id in sorted(before_members.keys() | after_members.keys()):
            old, new = before_members.get(member_id), after_members.get(member_id)
            lines += _member_lines(member_id, old, new, at_ms)
        return lines


def _member_lines(
    member_id: str, old: MemberView | None, new: MemberView | None, at_ms: int
) -> Iterator[dict[str, Any]]:
    def edge(kind: str, partition: AssignedPartition) -> dict[str, Any]:
        where = {"topic": partition.topic, "partition": partition.partition}
        return {"type": kind, "member": member_id, **where, "at_ms": at_ms}

    old_owned = set(old.assignment) if old is not None else set()
    new_owned = set(new.assignment) if new is not None else set()
    for partition in sorted(old_owned - new_owned):
        yield edge("revoked", partition)
    if new is None:
        yield {"type": "state", "member": member_id, "state": "UNSUBSCRIBED", "at_ms": at_ms,
               "epoch": None}  # fmt: skip
        return
    state = _coordinator_state(new)
    if old is None or state != _coordinator_state(old):
        yield {"type": "state", "member": member_id, "state": state, "at_ms": at_ms,
               "epoch": new.member_epoch}  # fmt: skip
    elif new.member_epoch is not None and new.member_epoch != old.member_epoch:
        yield {"type": "epoch", "member": member_id, "epoch": new.member_epoch, "at_ms": at_ms}
    for partition in sorted(new_owned - old_owned):
        yield edge("assigned", partition)


@dataclass(frozen=True)
class WatchOptions:
    """What ``kgm group watch`` was asked for."""

    group: str
    interval_ms: int
    output: str  # "text" or "json"
    #: Bound on each refresh's requests.
    timeout_ms: int
    count: int | None = None
    duration_ms: int | None = None
    record: IO[str] | None = None
    #: Redraw the whole view (a terminal) instead of printing one line per change.
    redraw: bool = False


def _change_text(change: dict[str, Any]) -> str:
    kind = change["change"]
    member = change.get("member")
    rest = {k: v for k, v in change.items() if k not in ("change", "member")}
    details = " ".join(
        f"{k}={_list_text(v) if isinstance(v, list) else v}" for k, v in rest.items()
    )
    who = f" {member}" if member is not None else ""
    return f"{kind}{who} {details}".rstrip()


def _list_text(names: list[str]) -> str:
    """``["t:0", "t:1"]`` as ``[t:0,t:1]``."""
    return "[" + ",".join(names) + "]"


def _clock_text(at_ms: int) -> str:
    seconds, millis = divmod(at_ms, 1000)
    return time.strftime("%H:%M:%S", time.localtime(seconds)) + f".{millis:03d}"


async def watch(
    admin: GroupAdmin,
    options: WatchOptions,
    out: IO[str] = sys.stdout,
    clock_ms: Callable[[], int] = wall_clock_ms,
) -> int:
    """Describe ``options.group`` every ``interval_ms`` until done; print and record changes.

    A group that does not exist (yet, or any more) is watched on: its absence is a state like
    any other. A failed refresh is reported on stderr and retried at the next interval.
    Returns the number of refreshes that showed a change.
    """
    started_ms = clock_ms()
    before: GroupDescription | None = None
    described = False  # a refresh has succeeded: later ones report differences only
    timeline = TimelineLines()
    recent: list[str] = []
    refreshes = changed = 0
    while True:
        at_ms = clock_ms()
        after = await _describe(admin, options)
        if after is not _FAILED:
            changes = group_changes(before, after) if described else _first(after)
            described = True
            if changes:
                changed += 1
                recent = [*recent, *(f"{_clock_text(at_ms)}  {_change_text(c)}" for c in changes)]
                recent = recent[-_RECENT_CHANGES:]
                _show(options, out, after, changes, recent, at_ms)
            if options.record is not None:
                for line in timeline.next(after, at_ms):
                    options.record.write(json.dumps(line, separators=(",", ":")) + "\n")
                options.record.flush()
            before = after
        refreshes += 1
        if options.count is not None and refreshes >= options.count:
            return changed
        if options.duration_ms is not None and clock_ms() - started_ms >= options.duration_ms:
            return changed
        await asyncio.sleep(options.interval_ms / 1000)  # the refresh interval itself


async def _describe(admin: GroupAdmin, options: WatchOptions) -> GroupDescription | None:
    """The group now; None if it does not exist; :data:`_FAILED` (reported) if the refresh
    failed."""
    try:
        async with asyncio.timeout(options.timeout_ms / 1000):
            return await admin.describe_group(options.group)
    except GroupNotFoundError:
        return None
    except (ConsumerError, KafkaException, TimeoutError) as error:
        print(f"kgm group watch: refresh failed: {type(error).__name__}: {error}", file=sys.stderr)
        return _FAILED


def _first(after: GroupDescription | None) -> list[dict[str, Any]]:
    """The changes the first refresh reports: everything there is (or that nothing is)."""
    return group_changes(None, after) or [{"change": "group_absent"}]


def _show(
    options: WatchOptions,
    out: IO[str],
    after: GroupDescription | None,
    changes: list[dict[str, Any]],
    recent: list[str],
    at_ms: int,
) -> None:
    if options.output == "json":
        snapshot = None if after is None else after.to_json()
        line = {"at_ms": at_ms, "changes": changes, "description": snapshot}
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
    elif options.redraw:
        body = f"group {options.group} does not exist" if after is None else describe_text(after)
        footer = f"every {options.interval_ms} ms; Ctrl-C stops. Recent changes:"
        out.write(_CLEAR_SCREEN + body + "\n\n" + footer + "\n" + "\n".join(recent) + "\n")
    else:
        for change in changes:
            out.write(f"{_clock_text(at_ms)}  {_change_text(change)}\n")
    out.flush()
