"""The rebalance callbacks of a group's members on one ``time.monotonic()`` time line, the
ownership intervals they imply and the checks over them (integration tests)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import TopicPartition
from consumer_support import (
    CONVERGENCE_S,
)

from tests.support import wait_until

Partition = tuple[str, int]
CallbackKind = Literal["assign", "revoke", "lost", "killed"]


@dataclass(frozen=True)
class CallbackEvent:
    """One rebalance callback (or a kill) of one member, stamped with ``time.monotonic()``."""

    at: float
    member: str
    kind: CallbackKind
    partitions: tuple[Partition, ...]
    thread: str = ""


@dataclass(frozen=True)
class Ownership:
    """``member`` owned ``partition`` from ``start`` until ``end`` (``inf``: still owns it)."""

    member: str
    partition: Partition
    start: float
    end: float
    ended_by: CallbackKind | None = None


def as_partitions(partitions: Iterable[TopicPartition]) -> tuple[Partition, ...]:
    return tuple(sorted((tp.topic, tp.partition) for tp in partitions))


class Timeline:
    """Thread-safe record of every member's rebalance callbacks.

    Assign is stamped when its callback starts (the member may use the partition from then
    on); revoke and lost are stamped when their callback returns (the member stops using the
    partition then). A killed member's ownership ends at its ``killed`` event.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[CallbackEvent] = []

    # recording ------------------------------------------------------------------------------

    def record(
        self, member: str, kind: CallbackKind, partitions: Iterable[Partition], at: float
    ) -> None:
        thread = threading.current_thread().name
        with self._lock:
            self._events.append(CallbackEvent(at, member, kind, tuple(sorted(partitions)), thread))

    def callbacks(
        self,
        member: str,
        on_revoke_extra: Callable[[Any, list[TopicPartition]], None] | None = None,
    ) -> dict[str, Callable[[Any, list[TopicPartition]], None]]:
        """``on_assign``/``on_revoke``/``on_lost`` keyword arguments for ``subscribe()``.

        ``on_revoke_extra`` runs inside ``on_revoke`` before the revoke is stamped (e.g. a
        commit of the revoked partitions).
        """

        def on_assign(_consumer: Any, partitions: list[TopicPartition]) -> None:
            self.record(member, "assign", as_partitions(partitions), time.monotonic())

        def on_revoke(consumer: Any, partitions: list[TopicPartition]) -> None:
            if on_revoke_extra is not None:
                on_revoke_extra(consumer, partitions)
            self.record(member, "revoke", as_partitions(partitions), time.monotonic())

        def on_lost(_consumer: Any, partitions: list[TopicPartition]) -> None:
            self.record(member, "lost", as_partitions(partitions), time.monotonic())

        return {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def mark_killed(self, member: str, at: float) -> None:
        self.record(member, "killed", (), at)

    def merge_child_events(self, member: str, path: Path) -> None:
        """Add the callbacks a member process recorded (side events ``callback`` of
        ``tests/member_process.py``, stamped with ``time.monotonic()``)."""
        if not path.exists():
            return
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by SIGKILL
                continue
            if entry.get("type") != "x" or entry.get("kind") != "callback":
                continue
            parts = [(str(t), int(p)) for t, p in entry["partitions"]]
            self.record(member, entry["callback"], parts, float(entry["mono"]))

    # reading --------------------------------------------------------------------------------

    def events(self, member: str | None = None) -> list[CallbackEvent]:
        with self._lock:
            chosen = [e for e in self._events if member is None or e.member == member]
        return sorted(chosen, key=lambda e: e.at)

    def owned(self, member: str) -> set[Partition]:
        """What ``member`` owns now according to its callbacks."""
        owned: set[Partition] = set()
        for event in self.events(member):
            if event.kind == "assign":
                owned |= set(event.partitions)
            elif event.kind in ("revoke", "lost"):
                owned -= set(event.partitions)
            elif event.kind == "killed":
                owned.clear()
        return owned

    def assignment(self, members: Iterable[str]) -> dict[str, set[Partition]]:
        return {member: self.owned(member) for member in members}

    def ownerships(self) -> list[Ownership]:
        """Every ownership interval of every member, from the callbacks."""
        intervals: list[Ownership] = []
        open_since: dict[tuple[str, Partition], float] = {}
        for event in self.events():
            if event.kind == "assign":
                for part in event.partitions:
                    open_since.setdefault((event.member, part), event.at)
                continue
            if event.kind == "killed":
                ended = [key for key in open_since if key[0] == event.member]
            else:
                ended = [(event.member, part) for part in event.partitions]
            for key in ended:
                start = open_since.pop(key, None)
                if start is not None:
                    intervals.append(Ownership(key[0], key[1], start, event.at, event.kind))
        for (member, part), start in open_since.items():
            intervals.append(Ownership(member, part, start, float("inf")))
        return intervals

    def anomalies(self) -> list[str]:
        """Assigns of already owned partitions and revokes/losses of partitions not owned."""
        problems: list[str] = []
        owned: dict[str, set[Partition]] = {}
        for event in self.events():
            mine = owned.setdefault(event.member, set())
            parts = set(event.partitions)
            if event.kind == "assign":
                if parts & mine:
                    problems.append(f"{event.member} assigned already owned {sorted(parts & mine)}")
                mine |= parts
            elif event.kind in ("revoke", "lost"):
                if parts - mine:
                    problems.append(f"{event.member} {event.kind} not owned {sorted(parts - mine)}")
                mine -= parts
            else:
                mine.clear()
        return problems

    def overlaps(self, *, except_lost: bool = False) -> list[str]:
        """Pairs of intervals in which two members owned the same partition at once.

        ``except_lost`` leaves out intervals ended by ``on_lost``: a lost partition was taken
        away before its owner was told, which is what "lost" means.
        """
        by_partition: dict[Partition, list[Ownership]] = {}
        for interval in self.ownerships():
            if except_lost and interval.ended_by == "lost":
                continue
            by_partition.setdefault(interval.partition, []).append(interval)
        problems: list[str] = []
        for part, intervals in sorted(by_partition.items()):
            intervals.sort(key=lambda i: i.start)
            for before, after in zip(intervals, intervals[1:], strict=False):
                if after.start < before.end:
                    problems.append(
                        f"{part}: {after.member} assigned at {after.start:.3f} while "
                        f"{before.member} owned it until {before.end:.3f}"
                    )
        return problems

    def count(self, member: str, kinds: Sequence[CallbackKind], since: float = 0.0) -> int:
        return sum(1 for e in self.events(member) if e.kind in kinds and e.at >= since)

    def dump(self) -> str:
        start = min((e.at for e in self.events()), default=0.0)
        return "\n".join(
            f"  +{e.at - start:8.3f}s {e.member:>10} {e.kind:<7} {list(e.partitions)}"
            for e in self.events()
        )

    def assert_revoke_before_assign(self, *, except_lost: bool = False) -> None:
        """Every partition left its old owner before reaching its new one; no odd callbacks."""
        problems = self.anomalies() + self.overlaps(except_lost=except_lost)
        assert not problems, "ownership violations:\n" + "\n".join(problems) + "\n" + self.dump()


def is_balanced_cover(assignment: Mapping[str, set[Partition]], partitions: set[Partition]) -> bool:
    """Disjoint, covering ``partitions`` exactly, and sizes differing by at most one."""
    sizes = [len(parts) for parts in assignment.values()]
    union: set[Partition] = set().union(*assignment.values()) if assignment else set()
    disjoint = sum(sizes) == len(union)
    return disjoint and union == partitions and bool(sizes) and max(sizes) - min(sizes) <= 1


def all_partitions(topic: str, count: int) -> set[Partition]:
    return {(topic, p) for p in range(count)}


def wait_for_balanced(
    timeline: Timeline,
    members: Sequence[str],
    partitions: set[Partition],
    timeout_s: float = CONVERGENCE_S,
) -> dict[str, set[Partition]]:
    """Wait until ``members`` own ``partitions`` between them, balanced; return the assignment."""
    wait_until(
        lambda: is_balanced_cover(timeline.assignment(members), partitions),
        timeout_s,
        f"a balanced assignment of {len(partitions)} partitions over {list(members)}",
        details=lambda: f"owned: {timeline.assignment(members)}\n{timeline.dump()}",
    )
    return timeline.assignment(members)
