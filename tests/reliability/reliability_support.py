"""Helpers of the reliability tier: member processes, live views of their files, faults, the
producer, the broker restart and the checks (imported as a plain module by the tests).

Times are wall-clock milliseconds (:func:`consumer.testing.timeline.wall_clock_ms`) everywhere,
so the events of the test process and of every member process line up.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.testing.broker import LocalBroker
from consumer.testing.invariants import CheckReport, check
from consumer.testing.proxy import ProxiedBroker
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import (
    FENCE,
    KILL,
    Fault,
    Processed,
    StateChange,
    wall_clock_ms,
)

MEMBER_SCRIPT = Path(__file__).with_name("member_proc.py")

#: Broker group settings (``consumer.testing.broker.fast_group_settings``).
HEARTBEAT_MS = 500
SESSION_MS = 6_000
#: The broker's session timer restarts at the last heartbeat it received, up to one interval
#: (plus a little transit) before a fault cut the member off: isolating faults are recorded as
#: starting that much earlier, so the checker cuts the member's ownership when the broker could.
LAST_HEARD_SLACK_MS = HEARTBEAT_MS + 100
#: Bound for a group to be STABLE and balanced again after a membership change.
CONVERGE_S = 30.0


def wait_until(
    predicate: Callable[[], object],
    timeout_s: float,
    what: str,
    details: Callable[[], str] | None = None,
) -> float:
    """Poll ``predicate`` until truthy; return the seconds it took; fail after ``timeout_s``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{extra}")
        time.sleep(0.05)
    return time.monotonic() - start


# ----------------------------------------------------------------------------------------------
# Member files


@dataclass
class MemberView:
    """What one member process wrote so far (read incrementally from its JSON-lines file)."""

    path: Path
    name: str
    state: str = "(none)"
    states: list[tuple[int, str]] = field(default_factory=list)
    owned: set[tuple[str, int]] = field(default_factory=set)
    processed: int = 0
    side: list[dict[str, Any]] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    _offset: int = 0

    def refresh(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        end = data.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        for raw in data[: end + 1].splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            self.lines.append(line)
            kind = line["type"]
            if kind == "state":
                self.state = line["state"]
                self.states.append((line["at_ms"], line["state"]))
            elif kind == "assigned":
                self.owned.add((line["topic"], line["partition"]))
            elif kind == "revoked":
                self.owned.discard((line["topic"], line["partition"]))
            elif kind == "processed":
                self.processed += 1
            elif kind == "x":
                self.side.append(line)

    def side_events(self, kind: str) -> list[dict[str, Any]]:
        self.refresh()
        return [s for s in self.side if s["kind"] == kind]


class MemberProcess:
    """One incarnation of a member (``slot`` = its proxy's name) running ``member_proc.py``."""

    def __init__(self, slot: str, name: str, workdir: Path, spec: dict[str, Any]) -> None:
        self.slot = slot
        self.name = name
        self.file = workdir / f"{name}.jsonl"
        self.stderr_path = workdir / f"{name}.stderr"
        self.view = MemberView(self.file, name)
        full = {**spec, "name": name, "file": str(self.file)}
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(MEMBER_SCRIPT), json.dumps(full)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.killed_at_ms: int | None = None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def refresh(self) -> MemberView:
        self.view.refresh()
        return self.view

    def signal(self, sig: int) -> int:
        at = wall_clock_ms()
        os.kill(self.process.pid, sig)
        return at

    def kill(self) -> int:
        at = self.signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.killed_at_ms = at
        return at

    def leave(self, timeout_s: float = 30.0) -> int:
        """SIGTERM: the member stops polling and closes (revoke with commit, leave heartbeat)."""
        at = self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not close within {timeout_s} s") from None
        return at

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def ensure_dead(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)


# ----------------------------------------------------------------------------------------------
# The group under test


class Fleet:
    """Member processes of one run, one slot (proxy) each, plus the run's parent timeline.

    The parent timeline holds what the test did (faults, produced records); the members' own
    files are merged into it by :meth:`timeline`.
    """

    def __init__(
        self,
        cluster: ProxiedBroker,
        workdir: Path,
        topic: str,
        group: str,
        partitions: int,
        **defaults: Any,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.topic = topic
        self.group = group
        self.partitions = partitions
        self.defaults = defaults
        self.members: list[MemberProcess] = []
        self.parent = Timeline()
        self.fault_counts: Counter[str] = Counter()
        self._incarnation: Counter[str] = Counter()

    def spawn(self, slot: str, **behaviour: Any) -> MemberProcess:
        self._incarnation[slot] += 1
        name = f"{slot}.{self._incarnation[slot]}"
        spec = {
            "bootstrap": self.cluster.bootstrap_servers(slot),
            "group": self.group,
            "topics": [self.topic],
            **self.defaults,
            **behaviour,
        }
        member = MemberProcess(slot, name, self.workdir, spec)
        self.members.append(member)
        return member

    def live(self) -> list[MemberProcess]:
        return [m for m in self.members if m.alive]

    def by_slot(self, slot: str) -> MemberProcess:
        return [m for m in self.members if m.slot == slot and m.alive][-1]

    def all_partitions(self) -> set[tuple[str, int]]:
        return {(self.topic, p) for p in range(self.partitions)}

    # -- waiting -----------------------------------------------------------------------------

    def converged(self, members: Sequence[MemberProcess] | None = None) -> bool:
        """Every given (default: live) member is STABLE, they own every partition once, and the
        assignment is balanced (owned counts differ by at most one, as the broker's uniform
        assignor targets): a newcomer is STABLE with nothing while the previous owner has not
        yet revoked what the broker will move to it, which is not converged."""
        chosen = list(members) if members is not None else self.live()
        if not chosen:
            return False
        views = [m.refresh() for m in chosen]
        if any(v.state != "STABLE" for v in views):
            return False
        owned = [p for v in views for p in v.owned]
        counts = [len(v.owned) for v in views]
        balanced = max(counts) - min(counts) <= 1
        return balanced and len(owned) == len(set(owned)) and set(owned) == self.all_partitions()

    def wait_converged(
        self, timeout_s: float = CONVERGE_S, members: Sequence[MemberProcess] | None = None
    ) -> float:
        return wait_until(
            lambda: self.converged(members),
            timeout_s,
            "the group to be STABLE and balanced with every partition owned once",
            self.describe,
        )

    def processed_keys(self) -> set[tuple[int, int]]:
        keys: set[tuple[int, int]] = set()
        for member in self.members:
            for line in member.refresh().lines:
                if line["type"] == "processed":
                    keys.add((line["partition"], line["offset"]))
        return keys

    def wait_all_processed(self, produced: ProducedLog, timeout_s: float) -> float:
        expected = produced.keys()
        return wait_until(
            lambda: expected <= self.processed_keys(),
            timeout_s,
            f"all {len(expected)} produced records to be processed",
            lambda: f"missing {len(expected - self.processed_keys())}\n" + self.describe(),
        )

    def describe(self) -> str:
        rows = []
        for m in self.members:
            v = m.refresh()
            rows.append(
                f"  {m.name}: alive={m.alive} state={v.state} owned={sorted(v.owned)} "
                f"processed={v.processed}"
            )
            if not m.alive and m.killed_at_ms is None:
                rows.append("    stderr: " + m.stderr()[-800:].replace("\n", "\n    "))
        return "\n".join(rows)

    # -- faults ------------------------------------------------------------------------------

    def fault(self, kind: str, member: str | None, start_ms: int, end_ms: int | None) -> None:
        self.parent.fault(kind, member, start_ms, end_ms)
        self.fault_counts[kind] += 1

    def kill(self, member: MemberProcess) -> None:
        at = member.kill()
        self.fault(KILL, member.name, at, at)

    def pause(
        self,
        member: MemberProcess,
        seconds: float,
        until: Callable[[], object] | None = None,
        max_s: float = 60.0,
    ) -> tuple[int, int]:
        """SIGSTOP ``member`` for ``seconds`` (then, if given, until ``until()`` holds); SIGCONT."""
        start = member.signal(signal.SIGSTOP)
        try:
            self._hold(seconds, until, max_s, f"{member.name} paused")
        finally:
            end = member.signal(signal.SIGCONT)
            self.fault("pause", member.name, start - LAST_HEARD_SLACK_MS, end)
        return start, end

    def blackhole(
        self,
        member: MemberProcess,
        seconds: float,
        until: Callable[[], object] | None = None,
        max_s: float = 60.0,
    ) -> tuple[int, int]:
        """Blackhole ``member``'s proxy for ``seconds`` (then until ``until()`` holds); heal."""
        proxy = self.cluster.proxy(member.slot)
        start = wall_clock_ms()
        proxy.blackhole()
        try:
            self._hold(seconds, until, max_s, f"{member.name} blackholed")
        finally:
            proxy.heal()
            end = wall_clock_ms()
            self.fault("blackhole", member.name, start - LAST_HEARD_SLACK_MS, end)
        return start, end

    def _hold(
        self, seconds: float, until: Callable[[], object] | None, max_s: float, what: str
    ) -> None:
        time.sleep(seconds)  # the fault itself: held this long
        if until is not None:
            wait_until(until, max_s, f"the group to react while {what}", self.describe)

    def stop_all(self) -> None:
        for member in self.members:
            if member.alive:
                with contextlib.suppress(AssertionError):
                    member.leave()
        for member in self.members:
            member.ensure_dead()

    # -- the record of the run ---------------------------------------------------------------

    def broker_fences(self) -> list[tuple[str, int, str]]:
        """``(timeline member, at_ms, reason)`` for every member of this group the broker's group
        coordinator fenced (its INFO log: "Member X fenced from the group because ...")."""
        names: dict[str, str] = {}
        for member in self.members:
            for side in member.view.side_events("member_id"):
                names[side["id"]] = member.name
        fences: list[tuple[str, int, str]] = []
        log = self.cluster.broker.log_path
        if not log.exists():
            return fences
        tag = f"[GroupId {self.group}] Member "
        for line in log.read_text(errors="replace").splitlines():
            if tag not in line or " fenced from the group" not in line:
                continue
            stamp = datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
            member_id = line.split(tag, 1)[1].split(" fenced from the group", 1)[0]
            reason = line.split(" fenced from the group", 1)[1].split(". (", 1)[0].strip()
            if member_id in names:
                fences.append((names[member_id], int(stamp.timestamp() * 1000), reason))
        return fences

    def timeline(self, rebalance_timeout_ms: int | None = None) -> Timeline:
        """The merged timeline: parent events plus every member's file.

        A ``slow_revoke`` longer than ``rebalance_timeout_ms`` becomes a FENCE fault: the broker
        fences the member when its rebalance timer (started when the revocation was sent, at the
        latest when the callback started) runs out, while the callback still runs.
        """
        merged = Timeline()
        for event in self.parent.events():
            merged.record(event)
        for name, at_ms, _reason in self.broker_fences():
            merged.fault(FENCE, name, at_ms, at_ms)
        for member in self.members:
            for line in member.refresh().lines:
                kind = line["type"]
                if kind == "assigned":
                    merged.assigned(line["member"], line["topic"], line["partition"], line["at_ms"])
                elif kind == "revoked":
                    merged.revoked(line["member"], line["topic"], line["partition"], line["at_ms"])
                elif kind == "processed":
                    merged.processed(
                        line["member"],
                        line["topic"],
                        line["partition"],
                        line["offset"],
                        line["at_ms"],
                    )
                elif kind == "commit":
                    merged.commit(
                        line["member"],
                        line["topic"],
                        line["partition"],
                        line["offset"],
                        line["at_ms"],
                    )
                elif kind == "state":
                    merged.state(line["member"], line["state"], line["at_ms"])
                elif (
                    kind == "x"
                    and line["kind"] == "slow_revoke"
                    and rebalance_timeout_ms is not None
                    and line["delay_s"] * 1000 > rebalance_timeout_ms
                ):
                    start = line["at_ms"] + rebalance_timeout_ms - 2 * HEARTBEAT_MS
                    merged.fault(FENCE, line["member"], start, start)
        return merged

    def side_events(self, kind: str) -> list[dict[str, Any]]:
        return [s for m in self.members for s in m.view.side_events(kind)]

    def save_evidence(self, problems: Sequence[str]) -> Path:
        """Write what a failed run needs to be understood next to the members' files: the
        faults the test injected, each member's broker member id, the broker's log lines about
        this group, and every problem the checks found. Returns the report's path."""
        path = self.workdir / f"run-report-{self.group}.txt"
        lines = ["# faults (kind, member, start_ms, end_ms)"]
        for event in self.parent.events():
            if isinstance(event, Fault):
                lines.append(f"{event.kind} {event.member} {event.start_ms} {event.end_ms}")
        lines.append("# member ids")
        for member in self.members:
            for side in member.view.side_events("member_id"):
                lines.append(f"{member.name} {side['id']}")
        lines.append("# broker log lines about the group")
        log = self.cluster.broker.log_path
        if log.exists():
            tag = f"[GroupId {self.group}]"
            lines += [x for x in log.read_text(errors="replace").splitlines() if tag in x]
        lines.append(f"# problems ({len(problems)})")
        lines += problems
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path


# ----------------------------------------------------------------------------------------------
# Producing


class ProducedLog:
    """Numbered records produced through the broker's direct listener (no proxy), with the
    partition and offset the broker acknowledged for each: value ``n`` goes to ``n % P``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[tuple[int, int], int] = {}  # (partition, offset) -> value
        self.failures: list[str] = []
        self.next_value = 0
        self._lock = threading.Lock()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 20,
                "acks": "all",
                "enable.idempotence": True,
                "queue.buffering.max.messages": 1_000_000,
                "message.timeout.ms": 300_000,
            }
        )

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failures.append(str(err))
            return
        value = int(msg.value() or b"-1")
        with self._lock:
            self.acked[(msg.partition() or 0, msg.offset() or 0)] = value

    def produce(self, count: int, flush: bool = True) -> None:
        for _ in range(count):
            n = self.next_value
            self.next_value += 1
            while True:
                try:
                    self.producer.produce(
                        self.topic,
                        str(n).encode(),
                        partition=n % self.partitions,
                        on_delivery=self._delivered,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            if n % 500 == 0:
                self.producer.poll(0)
        if flush:
            self.flush()

    def flush(self, timeout_s: float = 120.0) -> None:
        remaining = self.producer.flush(timeout_s)
        assert remaining == 0, f"{remaining} records not acknowledged within {timeout_s} s"
        assert not self.failures, f"delivery failures: {self.failures[:5]}"

    def keys(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self.acked)

    def record_into(self, timeline: Timeline) -> None:
        by_partition: dict[int, list[int]] = defaultdict(list)
        with self._lock:
            for partition, offset in self.acked:
                by_partition[partition].append(offset)
        for partition, offsets in by_partition.items():
            timeline.produced(self.topic, partition, offsets, at_ms=0)


class SteadyProducer(threading.Thread):
    """Produces ``total`` records at an even pace over ``seconds`` (background thread)."""

    def __init__(self, log: ProducedLog, total: int, seconds: float) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self.log = log
        self.total = total
        self.seconds = seconds
        self.done = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        chunk = max(1, self.total // max(1, int(self.seconds * 10)))
        sent = 0
        while sent < self.total:
            count = min(chunk, self.total - sent)
            self.log.produce(count, flush=False)
            sent += count
            self.log.producer.poll(0)
            due = start + self.seconds * sent / self.total
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # pacing of the workload, not a wait for a condition
        self.log.flush(300.0)
        self.done.set()


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=30
    )
    futures[topic].result(timeout=30)


# ----------------------------------------------------------------------------------------------
# Broker restart


def relaunch_broker(broker: LocalBroker, *, hard: bool) -> tuple[int, int]:
    """Stop the broker (SIGKILL when ``hard``, else SIGTERM) and start it again on the same
    data, ports and settings (:meth:`LocalBroker.restart`); return the wall-clock (down, up)
    milliseconds."""
    down = wall_clock_ms()
    broker.restart(hard=hard)
    return down, wall_clock_ms()


# ----------------------------------------------------------------------------------------------
# Checks


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


def first(items: Iterable[Any]) -> Any:
    return next(iter(items), None)
