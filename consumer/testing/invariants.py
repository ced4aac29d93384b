"""Check a run's timeline against the consumer group's invariants.

:func:`check` takes the events a :class:`~consumer.testing.timeline.Timeline` recorded and
returns a :class:`CheckReport`: no partition owned by two live members at once, no commit going
backwards, every produced record processed, every duplicate explained by a fault, and every
member STABLE again within a bound after the last fault.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from consumer.testing.timeline_events import (
    COMMIT_REGRESSION,
    DOUBLE_OWNERSHIP,
    FENCE,
    ISOLATING_FAULTS,
    KILL,
    LOST_RECORD,
    NOT_STABLE,
    UNEXPLAINED_DUPLICATE,
    Commit,
    Event,
    Fault,
    Ownership,
    Processed,
    Produced,
    StateChange,
)

__all__ = ["CheckReport", "Violation", "check"]


class _Recorded(Protocol):
    """What :func:`check` needs of a :class:`~consumer.testing.timeline.Timeline`."""

    def events(self) -> list[Event]: ...


_LEFT_STATES = frozenset({"UNSUBSCRIBED", "UNSUBSCRIBING"})
_Key = tuple[str, str, int]  # member, topic, partition


@dataclass(frozen=True)
class Violation:
    """One broken invariant, explained."""

    invariant: str
    message: str


@dataclass
class CheckReport:
    """Counts of a run and every invariant it broke (``ok`` when none)."""

    records_produced: int = 0
    records_processed: int = 0
    duplicates: int = 0
    excused_duplicates: int = 0
    lost_records: int = 0
    double_owned: int = 0
    commit_regressions: int = 0
    members_not_stable: int = 0
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No invariant was broken."""
        return not self.violations

    def add(self, invariant: str, message: str) -> None:
        """Record a violation of ``invariant``."""
        self.violations.append(Violation(invariant, message))

    def invariants_broken(self) -> set[str]:
        """The names of the broken invariants."""
        return {violation.invariant for violation in self.violations}

    def summary(self) -> str:
        """Counts on one line, then one line per violation."""
        head = (
            f"produced={self.records_produced} processed={self.records_processed} "
            f"duplicates={self.duplicates} (excused {self.excused_duplicates}) "
            f"lost={self.lost_records} double_owned={self.double_owned} "
            f"commit_regressions={self.commit_regressions} "
            f"members_not_stable={self.members_not_stable}"
        )
        return "\n".join([head, *(f"[{v.invariant}] {v.message}" for v in self.violations)])

    def raise_for_violations(self) -> None:
        """Raise ``AssertionError`` with :meth:`summary` if any invariant was broken."""
        if self.violations:
            raise AssertionError(self.summary())


def _ranges(offsets: list[int]) -> str:
    spans: list[str] = []
    for offset in sorted(offsets):
        if spans and offset == int(spans[-1].rsplit("..", 1)[-1]) + 1:
            spans[-1] = f"{spans[-1].split('..')[0]}..{offset}"
        else:
            spans.append(str(offset))
    shown = ", ".join(spans[:10])
    return shown + (f" and {len(spans) - 10} more ranges" if len(spans) > 10 else "")


def _deaths(
    events: list[Event], session_timeout_ms: int | None
) -> dict[str, list[tuple[int, str]]]:
    """Times at which each member stopped being live, with the reason."""
    deaths: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for event in events:
        if isinstance(event, Fault) and event.member is not None:
            if event.kind in (KILL, FENCE):
                deaths[event.member].append((event.start_ms, f"{event.kind} at {event.start_ms}"))
            elif event.kind in ISOLATING_FAULTS and session_timeout_ms is not None:
                expiry = event.start_ms + session_timeout_ms
                if event.end_ms is None or event.end_ms > expiry:
                    reason = f"{event.kind} from {event.start_ms} outlived the session"
                    deaths[event.member].append((expiry, f"{reason} at {expiry}"))
        elif isinstance(event, StateChange) and event.state == "FENCED":
            deaths[event.member].append((event.at_ms, f"FENCED at {event.at_ms}"))
    for times in deaths.values():
        times.sort()
    return deaths


def _death_between(
    deaths: dict[str, list[tuple[int, str]]], member: str, start_ms: int, end_ms: float
) -> tuple[int, str] | None:
    for at_ms, reason in deaths.get(member, []):
        if start_ms <= at_ms <= end_ms:
            return at_ms, reason
    return None


def check(
    events: _Recorded | Iterable[Event],
    *,
    stable_within_ms: int | None = None,
    session_timeout_ms: int | None = None,
    overlap_tolerance_ms: int = 0,
) -> CheckReport:
    """Check a run against the group invariants and explain every violation.

    1. No partition is owned by two live members at once (overlaps up to
       ``overlap_tolerance_ms`` are accepted); a member's ownership ends at its death.
    2. Accepted commits never go backwards on a partition.
    3. Every produced record is processed.
    4. A record is processed again only if the member that processed it before died (kill,
       fence) in between, and only if the record was in that member's uncommitted window:
       at or after the last offset it committed on that partition before dying.
    5. With ``stable_within_ms``: every member that is still alive and subscribed is STABLE
       ``stable_within_ms`` after the last fault ended.
    """
    evs = list(events) if isinstance(events, Iterable) else events.events()
    report = CheckReport()
    deaths = _deaths(evs, session_timeout_ms)
    _check_ownership(evs, deaths, overlap_tolerance_ms, report)
    _check_commits(evs, report)
    _check_records(evs, deaths, report)
    if stable_within_ms is not None:
        _check_stability(evs, stable_within_ms, report)
    return report


def _check_ownership(
    evs: list[Event], deaths: dict[str, list[tuple[int, str]]], tolerance_ms: int, r: CheckReport
) -> None:
    by_partition: dict[tuple[str, int], list[tuple[int, float, Ownership, str]]] = defaultdict(list)
    for ev in evs:
        if isinstance(ev, Ownership):
            end: float = float("inf") if ev.owned_to_ms is None else ev.owned_to_ms
            note = ""
            death = _death_between(deaths, ev.member, ev.owned_from_ms, end)
            if death is not None:
                end, note = death[0], f" (cut by {death[1]})"
            by_partition[(ev.topic, ev.partition)].append((ev.owned_from_ms, end, ev, note))
    for (topic, partition), spans in sorted(by_partition.items()):
        spans.sort(key=lambda span: span[0])
        for i, (start_a, end_a, a, note_a) in enumerate(spans):
            for start_b, end_b, b, note_b in spans[i + 1 :]:
                if start_b >= end_a:
                    break
                overlap = min(end_a, end_b) - start_b
                if a.member == b.member or overlap <= tolerance_ms:
                    continue
                r.double_owned += 1
                r.add(
                    DOUBLE_OWNERSHIP,
                    f"{topic}[{partition}] owned by {a.member} "
                    f"[{start_a}, {_ms(end_a)}){note_a} and by {b.member} "
                    f"[{start_b}, {_ms(end_b)}){note_b}: both live for {_ms(overlap)} ms",
                )


def _ms(value: float) -> str:
    return "end" if value == float("inf") else str(int(value))


def _check_commits(evs: list[Event], r: CheckReport) -> None:
    by_partition: dict[tuple[str, int], list[Commit]] = defaultdict(list)
    for ev in evs:
        if isinstance(ev, Commit):
            by_partition[(ev.topic, ev.partition)].append(ev)
    for (topic, partition), commits in sorted(by_partition.items()):
        commits.sort(key=lambda c: c.at_ms)  # stable: same-time commits keep recording order
        highest: Commit | None = None
        for commit in commits:
            if highest is not None and commit.offset < highest.offset:
                r.commit_regressions += 1
                r.add(
                    COMMIT_REGRESSION,
                    f"{topic}[{partition}] commit went back from {highest.offset} "
                    f"({highest.member} at {highest.at_ms}) to {commit.offset} "
                    f"({commit.member} at {commit.at_ms})",
                )
            if highest is None or commit.offset >= highest.offset:
                highest = commit


def _check_records(
    evs: list[Event], deaths: dict[str, list[tuple[int, str]]], r: CheckReport
) -> None:
    produced: dict[tuple[str, int], set[int]] = defaultdict(set)
    processed: dict[tuple[str, int, int], list[Processed]] = defaultdict(list)
    commits: dict[_Key, list[tuple[int, int]]] = defaultdict(list)  # (at_ms, offset)
    for ev in evs:
        if isinstance(ev, Produced):
            produced[(ev.topic, ev.partition)].add(ev.offset)
        elif isinstance(ev, Processed):
            processed[(ev.topic, ev.partition, ev.offset)].append(ev)
        elif isinstance(ev, Commit):
            commits[(ev.member, ev.topic, ev.partition)].append((ev.at_ms, ev.offset))
    for history in commits.values():
        history.sort()
    r.records_produced = sum(len(offsets) for offsets in produced.values())
    r.records_processed = sum(len(times) for times in processed.values())
    for (topic, partition), offsets in sorted(produced.items()):
        missing = [o for o in offsets if (topic, partition, o) not in processed]
        if missing:
            r.lost_records += len(missing)
            r.add(
                LOST_RECORD,
                f"{topic}[{partition}]: {len(missing)} produced record(s) never processed, "
                f"offsets {_ranges(missing)}",
            )
    for (topic, partition, offset), runs in sorted(processed.items()):
        runs.sort(key=lambda p: p.at_ms)
        for before, again in zip(runs, runs[1:], strict=False):
            r.duplicates += 1
            reason = _duplicate_excuse(before, again, deaths, commits)
            if reason.startswith("excused"):
                r.excused_duplicates += 1
                continue
            r.add(
                UNEXPLAINED_DUPLICATE,
                f"{topic}[{partition}] offset {offset} processed by {before.member} at "
                f"{before.at_ms} and again by {again.member} at {again.at_ms}: {reason}",
            )


def _duplicate_excuse(
    before: Processed,
    again: Processed,
    deaths: dict[str, list[tuple[int, str]]],
    commits: dict[_Key, list[tuple[int, int]]],
) -> str:
    death = _death_between(deaths, before.member, before.at_ms, again.at_ms)
    if death is None:
        return f"{before.member} did not die (kill or fence) in between"
    history = commits.get((before.member, before.topic, before.partition), [])
    done = [offset for at_ms, offset in history if at_ms <= death[0]]
    last_offset = done[-1] if done else None
    if last_offset is not None and before.offset < last_offset:
        return (
            f"{before.member} had committed {last_offset} before its {death[1]}, so the record "
            "was outside its uncommitted window"
        )
    return "excused"


def _check_stability(evs: list[Event], stable_within_ms: int, r: CheckReport) -> None:
    faults = [ev for ev in evs if isinstance(ev, Fault)]
    if not faults:
        return
    last_end = max(f.start_ms if f.end_ms is None else f.end_ms for f in faults)
    deadline = last_end + stable_within_ms
    states: dict[str, list[StateChange]] = defaultdict(list)
    for ev in evs:
        if isinstance(ev, StateChange):
            states[ev.member].append(ev)
    kills: dict[str, int] = {}
    for fault in faults:
        if fault.kind == KILL and fault.member is not None:
            kills[fault.member] = max(kills.get(fault.member, fault.start_ms), fault.start_ms)
    for member, changes in sorted(states.items()):
        changes.sort(key=lambda c: c.at_ms)
        if member in kills and changes[-1].at_ms <= kills[member]:
            continue  # killed and never restarted
        current = [c for c in changes if c.at_ms <= deadline]
        state = current[-1].state if current else "(no state yet)"
        if state == "STABLE" or state in _LEFT_STATES:
            continue
        later = next((c.at_ms for c in changes if c.at_ms > deadline and c.state == "STABLE"), None)
        when = f"it became STABLE only at {later}" if later is not None else "it never did"
        r.members_not_stable += 1
        r.add(
            NOT_STABLE,
            f"{member} was {state} at {deadline}, {stable_within_ms} ms after the last fault "
            f"ended at {last_end}; {when}",
        )
