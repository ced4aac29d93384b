"""The events of a run's timeline, and the names of the invariants checked over them.

See :mod:`consumer.testing.timeline` for what each event means and how runs record them;
:mod:`consumer.testing.invariants` checks them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EVENT_NAMES",
    "EVENT_TYPES",
    "CALLBACK_KINDS",
    "COMMIT_REGRESSION",
    "DOUBLE_OWNERSHIP",
    "FENCE",
    "ISOLATING_FAULTS",
    "KILL",
    "LOST_RECORD",
    "NOT_STABLE",
    "UNEXPLAINED_DUPLICATE",
    "Callback",
    "Commit",
    "EpochChange",
    "Event",
    "Fault",
    "Ownership",
    "Processed",
    "Produced",
    "StateChange",
    "wall_clock_ms",
]

KILL = "kill"
FENCE = "fence"
ISOLATING_FAULTS = frozenset({"blackhole", "drop", "pause", "partition"})

DOUBLE_OWNERSHIP = "double_ownership"
COMMIT_REGRESSION = "commit_regression"
LOST_RECORD = "lost_record"
UNEXPLAINED_DUPLICATE = "unexplained_duplicate"
NOT_STABLE = "not_stable"


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: comparable between processes of one machine."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Ownership:
    """``member`` owned ``topic[partition]`` during ``[owned_from_ms, owned_to_ms)``."""

    member: str
    topic: str
    partition: int
    owned_from_ms: int
    owned_to_ms: int | None = None


@dataclass(frozen=True)
class _AtOffset:
    """Something ``member`` did at ``offset`` of ``topic[partition]``, at ``at_ms``."""

    member: str
    topic: str
    partition: int
    offset: int
    at_ms: int


@dataclass(frozen=True)
class Commit(_AtOffset):
    """A commit the broker accepted: ``offset`` is the next offset ``member`` would read."""


@dataclass(frozen=True)
class Processed(_AtOffset):
    """``member`` processed the record at ``offset`` of ``topic[partition]``."""


@dataclass(frozen=True)
class Produced:
    """A record the run produced; every one of them must be processed."""

    topic: str
    partition: int
    offset: int
    at_ms: int = 0


@dataclass(frozen=True)
class Fault:
    """A fault of ``kind`` on ``member`` (``None``: the whole cluster) over ``[start, end]``."""

    kind: str
    member: str | None
    start_ms: int
    end_ms: int | None = None


@dataclass(frozen=True)
class StateChange:
    """``member`` entered ``state`` at ``at_ms``, at member ``epoch`` (``None``: not recorded)."""

    member: str
    state: str
    at_ms: int
    epoch: int | None = None


@dataclass(frozen=True)
class EpochChange:
    """The coordinator moved ``member`` to member ``epoch`` at ``at_ms`` (0: out of the group)."""

    member: str
    epoch: int
    at_ms: int


#: The kinds of :class:`Callback`: the rebalance callback that ran.
CALLBACK_KINDS = frozenset({"assigned", "revoked", "lost"})


@dataclass(frozen=True)
class Callback:
    """A rebalance callback of ``member`` (``kind``: assigned, revoked or lost) for
    ``partitions`` of ``topic``, at ``at_ms``."""

    member: str
    kind: str
    topic: str
    partitions: tuple[int, ...]
    at_ms: int

    def __post_init__(self) -> None:
        if self.kind not in CALLBACK_KINDS:
            allowed = ", ".join(sorted(CALLBACK_KINDS))
            raise ValueError(f"callback kind must be one of {allowed}, got {self.kind!r}")
        # JSON lines give a list: keep the event hashable and comparable.
        object.__setattr__(self, "partitions", tuple(int(p) for p in self.partitions))


Event = Ownership | Commit | Processed | Produced | Fault | StateChange | EpochChange | Callback
#: The ``type`` of each event in a JSON-lines timeline, and back.
EVENT_TYPES: dict[str, type[Any]] = {
    "ownership": Ownership,
    "commit": Commit,
    "processed": Processed,
    "produced": Produced,
    "fault": Fault,
    "state": StateChange,
    "epoch": EpochChange,
    "callback": Callback,
}
EVENT_NAMES = {cls: name for name, cls in EVENT_TYPES.items()}
