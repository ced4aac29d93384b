"""Record what a consumer group did during a run, then check it against the group's invariants.

A run's events (all times are milliseconds on one clock, wall time by default, so events from
several processes on one machine line up):

* :class:`Ownership`: ``member`` owned ``topic[partition]`` from ``owned_from_ms`` until
  ``owned_to_ms`` (``None``: until the end of the run, or until the member died);
* :class:`Commit`: a commit the broker *accepted*, ``offset`` being the next offset to read;
* :class:`Processed`: the application processed one record;
* :class:`Produced`: a record the test produced (and the broker acknowledged);
* :class:`Fault`: a fault on ``member`` (``None``: on the cluster) from ``start_ms`` to
  ``end_ms``. Kinds :data:`KILL` (SIGKILL) and :data:`FENCE` end the member's life at
  ``start_ms``; :data:`ISOLATING_FAULTS` (blackhole, drop, pause, partition) do so after
  ``session_timeout_ms`` when that is given to :func:`check`;
* :class:`StateChange`: the member entered ``state`` (``STABLE``, ``JOINING``, ``FENCED``...).
  Entering ``FENCED`` also ends the member's life at that time.

:class:`Timeline` records events from any number of threads; member subprocesses stream theirs
to JSON-lines files (:meth:`Timeline.stream_to`) that the test merges afterwards
(:meth:`Timeline.merge_jsonl`; a line cut short by SIGKILL is ignored). :func:`check` returns a
:class:`CheckReport` with counts and a readable explanation of every violation.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "COMMIT_REGRESSION",
    "DOUBLE_OWNERSHIP",
    "FENCE",
    "ISOLATING_FAULTS",
    "KILL",
    "LOST_RECORD",
    "NOT_STABLE",
    "UNEXPLAINED_DUPLICATE",
    "CheckReport",
    "Commit",
    "Event",
    "Fault",
    "Ownership",
    "Processed",
    "Produced",
    "StateChange",
    "Timeline",
    "Violation",
    "check",
    "wall_clock_ms",
]

KILL = "kill"
FENCE = "fence"
ISOLATING_FAULTS = frozenset({"blackhole", "drop", "pause", "partition"})
_LEFT_STATES = frozenset({"UNSUBSCRIBED", "UNSUBSCRIBING"})

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
class Commit:
    """A commit the broker accepted: ``offset`` is the next offset ``member`` would read."""

    member: str
    topic: str
    partition: int
    offset: int
    at_ms: int


@dataclass(frozen=True)
class Processed:
    """``member`` processed the record at ``offset`` of ``topic[partition]``."""

    member: str
    topic: str
    partition: int
    offset: int
    at_ms: int


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
    """``member`` entered ``state`` at ``at_ms``."""

    member: str
    state: str
    at_ms: int


Event = Ownership | Commit | Processed | Produced | Fault | StateChange
_TYPES: dict[str, type[Any]] = {
    "ownership": Ownership,
    "commit": Commit,
    "processed": Processed,
    "produced": Produced,
    "fault": Fault,
    "state": StateChange,
}
_NAMES = {cls: name for name, cls in _TYPES.items()}
_Key = tuple[str, str, int]  # member, topic, partition


class Timeline:
    """A thread-safe event log of one run. ``clock_ms`` stamps events recorded without a time."""

    def __init__(self, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._open: dict[_Key, int] = {}  # assigned, not yet revoked: owned_from_ms
        self._sink: IO[str] | None = None

    # -- recording ---------------------------------------------------------------------------

    def record(self, event: Event) -> None:
        """Append one event."""
        with self._lock:
            self._events.append(event)
            self._write({"type": _NAMES[type(event)], **asdict(event)})

    def assigned(self, member: str, topic: str, partition: int, at_ms: int | None = None) -> None:
        """``member`` starts owning ``topic[partition]`` (closes with :meth:`revoked`)."""
        self._edge("assigned", member, topic, partition, self._at(at_ms), stream=True)

    def revoked(self, member: str, topic: str, partition: int, at_ms: int | None = None) -> None:
        """``member`` stops owning ``topic[partition]`` (revoked or lost)."""
        self._edge("revoked", member, topic, partition, self._at(at_ms), stream=True)

    def _edge(self, kind: str, member: str, topic: str, partition: int, at_ms: int,
              stream: bool) -> None:  # fmt: skip
        key = (member, topic, partition)
        with self._lock:
            if kind == "assigned":
                if key in self._open:
                    raise ValueError(f"{member} already owns {topic}[{partition}]")
                self._open[key] = at_ms
            else:
                start = self._open.pop(key, None)
                if start is None:
                    raise ValueError(f"{member} does not own {topic}[{partition}]")
                self._events.append(Ownership(member, topic, partition, start, at_ms))
            if stream:
                line = {"member": member, "topic": topic, "partition": partition, "at_ms": at_ms}
                self._write({"type": kind, **line})

    def commit(
        self, member: str, topic: str, partition: int, offset: int, at_ms: int | None = None
    ) -> None:
        """An accepted commit of ``offset`` (the next offset to read)."""
        self.record(Commit(member, topic, partition, offset, self._at(at_ms)))

    def processed(
        self, member: str, topic: str, partition: int, offset: int, at_ms: int | None = None
    ) -> None:
        """``member`` processed the record at ``offset``."""
        self.record(Processed(member, topic, partition, offset, self._at(at_ms)))

    def produced(
        self, topic: str, partition: int, offsets: Iterable[int], at_ms: int | None = None
    ) -> None:
        """The run produced records at ``offsets`` of ``topic[partition]``."""
        at = self._at(at_ms)
        for offset in offsets:
            self.record(Produced(topic, partition, offset, at))

    def fault(
        self, kind: str, member: str | None, start_ms: int | None = None, end_ms: int | None = None
    ) -> None:
        """A fault of ``kind`` on ``member`` (see the module docstring for kinds)."""
        self.record(Fault(kind, member, self._at(start_ms), end_ms))

    def state(self, member: str, state: str, at_ms: int | None = None) -> None:
        """``member`` entered ``state``."""
        self.record(StateChange(member, state, self._at(at_ms)))

    def _at(self, at_ms: int | None) -> int:
        return self._clock_ms() if at_ms is None else at_ms

    # -- reading -----------------------------------------------------------------------------

    def events(self) -> list[Event]:
        """Every event so far; ownership still open has ``owned_to_ms=None``."""
        with self._lock:
            still_open = [
                Ownership(m, t, p, start, None) for (m, t, p), start in self._open.items()
            ]
            return [*self._events, *still_open]

    # -- JSON lines --------------------------------------------------------------------------

    def stream_to(self, path: Path) -> None:
        """From now on, also append every recorded event to ``path`` (one flushed line each)."""
        with self._lock:
            self._sink = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def close(self) -> None:
        """Stop streaming (see :meth:`stream_to`)."""
        with self._lock:
            if self._sink is not None:
                self._sink.close()
                self._sink = None

    def _write(self, line: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._sink.flush()

    def write_jsonl(self, path: Path) -> None:
        """Write every event to ``path`` as JSON lines (readable by :meth:`merge_jsonl`)."""
        with open(path, "w", encoding="utf-8") as out:
            for event in self.events():
                out.write(json.dumps({"type": _NAMES[type(event)], **asdict(event)}) + "\n")

    def merge_jsonl(self, path: Path) -> int:
        """Add the events of a JSON-lines file; returns how many lines were read.

        ``assigned``/``revoked`` pairs become :class:`Ownership` intervals (an ``assigned``
        without ``revoked`` stays open). A last line without its newline (the writer was killed
        mid-line) is ignored; any other malformed line raises ``ValueError``.
        """
        text = Path(path).read_text(encoding="utf-8")
        lines = text.split("\n")
        if lines and lines[-1] and not text.endswith("\n"):
            lines.pop()  # cut short by a kill
        count = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                kind = data.pop("type")
                if kind in ("assigned", "revoked"):
                    self._edge(kind, stream=False, **data)
                else:
                    with self._lock:
                        self._events.append(_TYPES[kind](**data))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a timeline event: {exc}") from exc
            count += 1
        return count


# ----------------------------------------------------------------------------------------------
# Checking


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
    events: Timeline | Iterable[Event],
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
    evs = events.events() if isinstance(events, Timeline) else list(events)
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
