"""The checks of a reliability run: the timeline invariants plus the tier's own (deliveries
after revocation, zombie records, record values, fatal errors)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from fleet import Fleet
from member_processes import MemberProcess
from reliability_support import (
    SESSION_MS,
    ProducedLog,
)

from consumer.testing.invariants import CheckReport, check
from consumer.testing.timeline_events import (
    FENCE,
    Fault,
    Processed,
    StateChange,
)


@dataclass
class RunResult:
    """The checker's report plus the tier's own checks and counts."""

    report: CheckReport
    events: int
    zombie_records: int
    delivered_after_revoke: list[str]
    value_problems: list[str]
    fatal: list[str]
    faults: dict[str, int]
    broker_fences: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        out = [f"[{v.invariant}] {v.message}" for v in self.report.violations]
        out += [f"[delivered_after_revoke] {p}" for p in self.delivered_after_revoke]
        out += [f"[values] {p}" for p in self.value_problems]
        out += [f"[fatal] {p}" for p in self.fatal]
        return out

    def counts_line(self, name: str) -> str:
        r = self.report
        extra = " ".join(f"{k}={v}" for k, v in self.extra.items())
        faults = ",".join(f"{k}:{v}" for k, v in sorted(self.faults.items())) or "none"
        return (
            f"[reliability] {name}: records={r.records_produced} processed={r.records_processed} "
            f"events={self.events} duplicates={r.duplicates} (excused {r.excused_duplicates}) "
            f"zombie_records={self.zombie_records} lost={r.lost_records} "
            f"double_owned={r.double_owned} commit_regressions={r.commit_regressions} "
            f"delivered_after_revoke={len(self.delivered_after_revoke)} "
            f"broker_fences={self.broker_fences} "
            f"faults={faults} {extra}"
        ).rstrip()


def delivered_after_revoke(fleet: Fleet) -> list[str]:
    """Records a member processed while it did not own their partition by its own callbacks,
    or after ``on_revoke``/``on_lost`` for the partition had started."""
    problems: list[str] = []
    for member in fleet.members:
        deliverable: set[tuple[str, int]] = set()
        for line in member.refresh().lines:
            kind = line["type"]
            if kind == "assigned":
                deliverable.add((line["topic"], line["partition"]))
            elif kind == "x" and line["kind"] in ("revoke_start", "lost_start"):
                deliverable -= {(t, p) for t, p in line["partitions"]}
            elif kind == "processed" and (line["topic"], line["partition"]) not in deliverable:
                problems.append(
                    f"{member.name} processed {line['topic']}[{line['partition']}] "
                    f"offset {line['offset']} at {line['at_ms']} without owning it"
                )
    return problems


#: States in which a member holds no partition of an earlier membership: reaching one ends a
#: zombie window (it learned it was out, or it is joining afresh).
_OUT_OF_GROUP = ("FENCED", "STALE", "UNSUBSCRIBED", "JOINING")


def zombie_records(events: list[Any], session_ms: int) -> set[Processed]:
    """Records processed by a member after the broker had already expired or fenced it and
    before the member learned so (its next FENCED/STALE/UNSUBSCRIBED/JOINING state): the member
    cannot know (its commits are refused), so they are reported apart instead of as
    duplicates. A fence that finds the member already out of the group opens no window."""
    deaths: dict[str, list[int]] = defaultdict(list)
    states: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for ev in events:
        if isinstance(ev, Fault) and ev.member is not None:
            if ev.kind == FENCE:
                deaths[ev.member].append(ev.start_ms)
            elif (
                ev.kind in ("pause", "blackhole")
                and ev.end_ms is not None
                and ev.end_ms - ev.start_ms > session_ms
            ):
                deaths[ev.member].append(ev.start_ms + session_ms)
        elif isinstance(ev, StateChange):
            states[ev.member].append((ev.at_ms, ev.state))
    windows: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for member, times in deaths.items():
        history = sorted(states.get(member, []))
        for death in times:
            before = [state for at, state in history if at <= death]
            if before and before[-1] in _OUT_OF_GROUP:
                continue  # already out: nothing of the old membership to process
            told = min((at for at, state in history if at >= death and state in _OUT_OF_GROUP),
                       default=float("inf"))  # fmt: skip
            windows[member].append((death, told))
    return {
        ev
        for ev in events
        if isinstance(ev, Processed)
        and any(death <= ev.at_ms <= told for death, told in windows.get(ev.member, []))
    }


def check_run(
    fleet: Fleet,
    produced: ProducedLog,
    *,
    rebalance_timeout_ms: int | None = None,
    stable_within_ms: int | None = None,
) -> RunResult:
    """Merge the run and check it: the timeline invariants, deliveries after revocation, the
    full key set of values, and that nothing fatal happened."""
    timeline = fleet.timeline(rebalance_timeout_ms)
    produced.record_into(timeline)
    events = timeline.events()
    # A zombie record only matters as a duplicate: it is set apart from the duplicate check, but
    # a record processed by zombies alone keeps its earliest processing (so it never turns into
    # a "lost" record, and two zombies processing it do not count as a live duplicate).
    candidates = zombie_records(events, SESSION_MS)
    covered = {
        (ev.topic, ev.partition, ev.offset)
        for ev in events
        if isinstance(ev, Processed) and ev not in candidates
    }
    kept_zombies: set[Processed] = set()
    for ev in sorted(candidates, key=lambda p: p.at_ms):
        key = (ev.topic, ev.partition, ev.offset)
        if key not in covered:
            covered.add(key)
            kept_zombies.add(ev)
    zombies = candidates - kept_zombies
    kept = [ev for ev in events if ev not in zombies]
    report = check(kept, session_timeout_ms=SESSION_MS, stable_within_ms=stable_within_ms)
    values: dict[tuple[int, int], int | None] = {}
    value_problems: list[str] = []
    for side in fleet.side_events("value"):
        key = (side["p"], side["o"])
        expected = produced.acked.get(key)
        if expected is None or side["v"] != expected:
            value_problems.append(f"{key} carried value {side['v']}, produced {expected}")
        values[key] = side["v"]
    missing_values = set(produced.acked.values()) - set(values.values())
    if missing_values:
        value_problems.append(f"{len(missing_values)} produced values never seen")
    fatal = [
        f"{e['member']}: {e.get('text') or e.get('error')}"
        for kind in ("error", "exception")
        for e in fleet.side_events(kind)
        if e.get("fatal")
    ]
    fatal += [
        f"{m.name} entered FATAL"
        for m in fleet.members
        if any(s == "FATAL" for _t, s in m.view.states)
    ]
    result = RunResult(
        report=report,
        events=len(events),
        broker_fences=len(fleet.broker_fences()),
        zombie_records=len(zombies),
        delivered_after_revoke=delivered_after_revoke(fleet),
        value_problems=value_problems[:20],
        fatal=fatal,
        faults=dict(fleet.fault_counts),
    )
    fleet.save_evidence(result.problems)
    return result


def callbacks_of(member: MemberProcess, since_ms: int) -> list[dict[str, Any]]:
    """Rebalance callbacks (assigned/revoked edges, lost) of ``member`` at or after ``since_ms``."""
    return [
        line
        for line in member.refresh().lines
        if line["at_ms"] >= since_ms
        and (
            line["type"] in ("assigned", "revoked")
            or (line["type"] == "x" and line["kind"] in ("revoke_start", "lost_start"))
        )
    ]


def states_of(member: MemberProcess, since_ms: int = 0) -> list[str]:
    return [s for t, s in member.refresh().states if t >= since_ms]
