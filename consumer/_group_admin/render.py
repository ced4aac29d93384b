"""Text and JSON output of ``kgm group``: plain aligned tables, ``-`` for what a group type
does not have; JSON with the stable keys of :mod:`consumer._group_admin.model`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Final

from .model import SHARE, AssignedPartition, GroupDescription, GroupListing, PartitionOffsets

__all__ = [
    "describe_json",
    "describe_text",
    "format_assignment",
    "list_json",
    "list_text",
    "table",
]

_MISSING: Final = "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns two spaces apart; None shows as ``-``."""
    cells = [[_MISSING if value is None else str(value) for value in row] for row in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def format_assignment(partitions: Sequence[AssignedPartition] | None) -> str | None:
    """``orders:0,1 payments:3`` (None stays None; empty is ``""``)."""
    if partitions is None:
        return None
    by_topic: dict[str, list[int]] = {}
    for assigned in partitions:
        by_topic.setdefault(assigned.topic, []).append(assigned.partition)
    return " ".join(
        f"{topic}:{','.join(str(p) for p in sorted(numbers))}"
        for topic, numbers in sorted(by_topic.items())
    )


def list_text(listings: Sequence[GroupListing]) -> str:
    """The ``kgm group list`` table."""
    if not listings:
        return "no groups"
    rows = [(g.group, g.type, g.state, g.members) for g in listings]
    return table(("GROUP", "TYPE", "STATE", "MEMBERS"), rows)


def list_json(listings: Sequence[GroupListing]) -> str:
    """``[{"group", "type", "state", "members"}, ...]``."""
    return json.dumps([g.to_json() for g in listings], indent=2)


#: Partition columns per group type: a share group has start offsets, the others commits.
_PartitionColumn = tuple[str, Callable[[PartitionOffsets], object]]
_SHARE_COLUMNS: Final[tuple[_PartitionColumn, ...]] = (
    ("START-OFFSET", lambda p: p.start_offset),
    ("LEADER-EPOCH", lambda p: p.leader_epoch),
    ("LAG", lambda p: p.lag),
)
_COMMIT_COLUMNS: Final[tuple[_PartitionColumn, ...]] = (
    ("COMMITTED-OFFSET", lambda p: p.committed_offset),
    ("LEADER-EPOCH", lambda p: p.leader_epoch),
    ("LAG", lambda p: p.lag),
)


def describe_text(description: GroupDescription) -> str:
    """Header line, a members table and a partitions table."""
    d = description
    header = (
        f"GROUP {d.group}  TYPE {d.type}  STATE {d.state}  "
        f"GROUP-EPOCH {_show(d.group_epoch)}  ASSIGNMENT-EPOCH {_show(d.assignment_epoch)}  "
        f"ASSIGNOR {_show(d.assignor)}"
    )
    parts = [header, ""]
    if d.members is None:
        parts.append(f"members: not described for {d.type} groups")
    elif not d.members:
        parts.append("no members")
    else:
        member_rows: list[tuple[object, ...]] = [
            (
                m.member_id,
                m.instance_id,
                m.client_id,
                m.host,
                m.rack,
                m.member_epoch,
                format_assignment(m.assignment) or _MISSING,
                format_assignment(m.target_assignment),
            )
            for m in d.members
        ]
        headers = ("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "RACK", "EPOCH")
        parts.append(table((*headers, "ASSIGNMENT", "TARGET-ASSIGNMENT"), member_rows))
    parts.append("")
    if not d.partitions:
        parts.append("no partition offsets")
    else:
        columns = _SHARE_COLUMNS if d.type == SHARE else _COMMIT_COLUMNS
        rows = [(p.topic, p.partition, *(get(p) for _, get in columns)) for p in d.partitions]
        parts.append(table(("TOPIC", "PARTITION", *(name for name, _ in columns)), rows))
    return "\n".join(parts)


def describe_json(description: GroupDescription) -> str:
    """The documented describe schema."""
    return json.dumps(description.to_json(), indent=2)


def _show(value: object) -> str:
    return _MISSING if value is None else str(value)
