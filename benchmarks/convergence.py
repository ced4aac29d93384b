"""Convergence: how long a group takes to settle after a membership change.

Every member runs in its own process (``benchmarks._member_proc``), so a member can be SIGKILLed
and no implementation shares a GIL with another member. Per implementation and repetition, one
chain on a 6-partition topic measures

* ``join-1-2`` and ``join-2-3``: a member subscribes (t0 = the parent sends ``go``);
* ``leave-3-2``: a member closes (t0 = the child starts ``close()``);
* ``crash-3-2``: a member is SIGKILLed (t0 = the kill);

and a separate cold join measures ``cold-join``: 10 members subscribe at once to 900 partitions
(the public KIP-848 reference point; 3 x 30 in smoke mode).

Converged = every partition owned by exactly one live member (from the callback stamps), every
live member owns something, the broker's ConsumerGroupDescribe says STABLE with exactly the live
members and the same assignment, and (ours only) every live member's state is STABLE. The
convergence time is the latest callback (or, for ours, STABLE state) stamp up to that point,
minus t0. ``max_unowned_s`` is the longest interval, after t0, in which some partition had no
owner.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmarks.common import (
    FAST_HEARTBEAT_MS,
    FAST_SESSION_MS,
    REPO_ROOT,
    admin_client,
    create_topic,
    log,
    ratio,
    summary,
    topic_partitions,
    warm_topic_for_groups,
)

IMPLEMENTATIONS = ("ours", "confluent-848", "classic-coop", "classic-eager")
LABELS = {
    "ours": "ours (KIP-848)",
    "confluent-848": "confluent-kafka KIP-848",
    "classic-coop": "classic cooperative-sticky",
    "classic-eager": "classic eager (range)",
}
CHAIN_SCENARIOS = ("join-1-2", "join-2-3", "leave-3-2", "crash-3-2")
SCENARIOS = (*CHAIN_SCENARIOS, "cold-join")
CHAIN_PARTITIONS = 6


@dataclass(frozen=True)
class BrokerProfile:
    """A broker and the group timers it runs with."""

    name: str
    bootstrap: str
    heartbeat_ms: int
    session_ms: int


@dataclass
class Child:
    """A member process and the events it reported."""

    name: str
    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    dead_at: float | None = None
    killed: bool = False
    reader: threading.Thread | None = None

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()


class Group:
    """The member processes of one group, with their events under one condition variable."""

    def __init__(self, profile: BrokerProfile, impl: str, topic: str, partitions: int) -> None:
        self.profile = profile
        self.impl = impl
        self.topic = topic
        self.partitions = partitions
        self.group_id = f"bench-conv-{impl}-{uuid.uuid4().hex[:8]}"
        self.children: dict[str, Child] = {}
        self.cond = threading.Condition()
        self.admin = admin_client(profile.bootstrap)
        #: Extra fields for every member's spec (e.g. ``busy_ms``, used by benchmarks.scaling).
        self.extra_spec: dict[str, Any] = {}

    # --- processes ------------------------------------------------------------------------

    def spawn(self, names: list[str], timeout_s: float = 90.0) -> None:
        """Start member processes and wait until each has built its consumer."""
        for name in names:
            spec = {
                "impl": self.impl,
                "bootstrap": self.profile.bootstrap,
                "group": self.group_id,
                "topic": self.topic,
                "name": name,
                "heartbeat_ms": self.profile.heartbeat_ms,
                "session_ms": self.profile.session_ms,
                **self.extra_spec,
            }
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks._member_proc", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=REPO_ROOT,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            child = Child(name, process)
            self.children[name] = child
            child.reader = threading.Thread(target=self._read, args=(child,), daemon=True)
            child.reader.start()
        with self.cond:
            ok = self.cond.wait_for(
                lambda: all(self._has(self.children[n], "ready") for n in names), timeout_s
            )
        if not ok:
            raise TimeoutError(f"{self.impl}: member processes did not start in {timeout_s} s")

    def _read(self, child: Child) -> None:
        assert child.process.stdout is not None
        for line in child.process.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self.cond:
                    child.events.append(event)
                    self.cond.notify_all()
        with self.cond:
            if child.dead_at is None:
                child.dead_at = time.monotonic()
            self.cond.notify_all()

    @staticmethod
    def _has(child: Child, kind: str) -> bool:
        return any(e["ev"] == kind for e in child.events)

    def go(self, names: list[str]) -> float:
        """Tell members to subscribe; returns t0 (just before the first ``go``)."""
        t0 = time.monotonic()
        for name in names:
            self.children[name].send("go")
        return t0

    def close(self, name: str, timeout_s: float = 60.0) -> float:
        """Ask a member to close; returns t0 = the moment its ``close()`` started."""
        child = self.children[name]
        child.send("close")
        with self.cond:
            self.cond.wait_for(lambda: self._has(child, "closing"), timeout_s)
            stamps = [e["at"] for e in child.events if e["ev"] == "closing"]
        if not stamps:
            raise TimeoutError(f"{self.impl}: member {name} did not start closing")
        return float(stamps[0])

    def kill(self, name: str) -> float:
        """SIGKILL a member; returns t0 = the kill."""
        child = self.children[name]
        t0 = time.monotonic()
        child.process.send_signal(signal.SIGKILL)
        child.process.wait(10)
        with self.cond:
            child.dead_at, child.killed = t0, True
        return t0

    def shutdown(self) -> None:
        """Close every member still running (SIGKILL the ones that do not exit)."""
        running = [c for c in self.children.values() if c.process.poll() is None]
        for child in running:
            child.send("close")
        deadline = time.monotonic() + 30
        for child in running:
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait(10)
        for child in self.children.values():
            if child.process.poll() is None:
                child.process.kill()
                child.process.wait(10)
            if child.reader is not None:
                child.reader.join(10)
            for stream in (child.process.stdin, child.process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    # --- ownership ------------------------------------------------------------------------

    def owned(self, child: Child) -> set[int]:
        """Partitions ``child`` owns according to its callbacks so far."""
        owned: set[int] = set()
        for event in child.events:
            if event["ev"] == "assign":
                owned |= set(event["parts"])
            elif event["ev"] in ("revoke", "lost"):
                owned -= set(event["parts"])
        return owned

    def _locally_converged(self, live: list[str]) -> bool:
        counts: Counter[int] = Counter()
        for name in live:
            child = self.children[name]
            owned = self.owned(child)
            if not owned:
                return False
            counts.update(owned)
            if self.impl == "ours":
                states = [e["state"] for e in child.events if e["ev"] == "state"]
                if not states or states[-1] != "STABLE":
                    return False
        return len(counts) == self.partitions and all(v == 1 for v in counts.values())

    def _broker_agrees(self, live: list[str]) -> bool:
        try:
            description = self.admin.describe_consumer_groups([self.group_id])[
                self.group_id
            ].result(timeout=10)
        except Exception:  # noqa: BLE001 - a failed describe just means "not yet"
            return False
        state = getattr(description.state, "name", str(description.state))
        if state.upper() != "STABLE" or len(description.members) != len(live):
            return False
        broker = sorted(
            tuple(sorted(tp.partition for tp in m.assignment.topic_partitions))
            for m in description.members
        )
        with self.cond:
            local = sorted(tuple(sorted(self.owned(self.children[n]))) for n in live)
        return broker == local

    def wait_converged(self, live: list[str], t0: float, timeout_s: float) -> dict[str, Any]:
        """Wait for convergence of the ``live`` members after an event at ``t0``."""
        deadline = t0 + timeout_s
        while True:
            with self.cond:
                self.cond.wait_for(
                    lambda: self._locally_converged(live) or time.monotonic() > deadline,
                    max(0.0, deadline - time.monotonic()),
                )
                local = self._locally_converged(live)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.impl}: {len(live)} members did not converge in {timeout_s:.0f} s"
                )
            if local and self._broker_agrees(live):
                break
            with self.cond:  # not yet: wait for the next event, or re-ask the broker shortly
                self.cond.wait(0.1)
        checked = time.monotonic()
        with self.cond:
            snapshot = {n: list(c.events) for n, c in self.children.items()}
        stamps = [
            e["at"]
            for name in live
            for e in snapshot[name]
            if e["ev"] in ("assign", "revoke", "lost", "state") and t0 <= e["at"] <= checked
        ]
        end = max(stamps, default=t0)
        callbacks = [
            e["at"]
            for name in live
            for e in snapshot[name]
            if e["ev"] in ("assign", "revoke", "lost") and t0 <= e["at"] <= checked
        ]
        return {
            "converge_s": end - t0,
            # The same, from callback stamps only (librdkafka's own definition of done; for ours
            # it leaves out the OffsetFetch-to-STABLE tail that the main figure includes).
            "callbacks_s": max(callbacks, default=t0) - t0,
            "max_unowned_s": self._max_unowned(snapshot, t0, end),
            "timeline": self._timeline(snapshot, t0, end),
            "t0": t0,
        }

    def _max_unowned(
        self, snapshot: dict[str, list[dict[str, Any]]], t0: float, end: float
    ) -> float:
        """Longest interval after t0 with no owner, over all partitions."""
        changes: list[tuple[float, int, int]] = []  # (time, +1/-1, partition)
        for name, events in snapshot.items():
            dead_at = self.children[name].dead_at
            owned: set[int] = set()
            for event in events:
                kind = event.get("ev")
                if kind not in ("assign", "revoke", "lost"):
                    continue
                parts = set(event["parts"])
                delta = 1 if kind == "assign" else -1
                changes.extend((event["at"], delta, p) for p in parts)
                owned = owned | parts if delta > 0 else owned - parts
            if self.children[name].killed and dead_at is not None and dead_at >= t0:
                changes.extend((dead_at, -1, p) for p in owned)  # killed: ownership ends there
        changes.sort()
        count = Counter[int]()
        gap_start: dict[int, float] = {}
        longest = 0.0
        for at, delta, partition in changes:
            if at > t0:
                break
            count[partition] += delta
        for partition in range(self.partitions):
            if count[partition] <= 0:
                gap_start[partition] = t0
        for at, delta, partition in changes:
            if at <= t0:
                continue
            if at > end:
                break
            count[partition] += delta
            if count[partition] <= 0 and partition not in gap_start:
                gap_start[partition] = at
            elif count[partition] > 0 and partition in gap_start:
                longest = max(longest, at - gap_start.pop(partition))
        for start in gap_start.values():
            longest = max(longest, end - start)
        return longest

    def _timeline(
        self, snapshot: dict[str, list[dict[str, Any]]], t0: float, end: float
    ) -> dict[str, Any]:
        """Per member: ``[[seconds since t0, owned partition count], ...]`` for the plot."""
        lanes: dict[str, list[list[float]]] = {}
        for name, events in snapshot.items():
            owned: set[int] = set()
            steps: list[list[float]] = []
            for event in events:
                kind = event.get("ev")
                if kind not in ("assign", "revoke", "lost") or event["at"] > end + 0.001:
                    continue
                if kind == "assign":
                    owned |= set(event["parts"])
                else:
                    owned -= set(event["parts"])
                steps.append([round(max(event["at"] - t0, -0.001), 4), len(owned)])
            start_count = next((c for t, c in reversed(steps) if t <= 0), 0)
            after = [s for s in steps if s[0] > 0]
            dead_at = self.children[name].dead_at
            if (
                dead_at is not None
                and t0 <= dead_at <= end
                and self.children[name].process.returncode
            ):
                after.append([round(dead_at - t0, 4), 0])
            lanes[name] = [[0.0, start_count], *after]
        return {"lanes": lanes, "end_s": round(end - t0, 4)}


def _ensure_topic(bootstrap: str, name: str, partitions: int) -> str:
    if topic_partitions(bootstrap, name) != partitions:
        if topic_partitions(bootstrap, name) is not None:
            name = f"{name}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, name, partitions)
        warm_topic_for_groups(bootstrap, name, partitions)
    return name


def _timeouts(profile: BrokerProfile) -> tuple[float, float]:
    hi = profile.heartbeat_ms / 1000
    return 30 + 6 * hi, profile.session_ms / 1000 + 30 + 6 * hi


def dephase(profile: BrokerProfile, rng: random.Random) -> None:
    """Wait a random fraction of a heartbeat interval before the next membership change.

    Convergence is observed right after a member's acknowledging heartbeat, so an event fired at
    once would always land at the same phase of the members' heartbeat cycles (and make the
    result bimodal). This delay is a deliberate randomisation, not a synchronisation.
    """
    time.sleep(rng.uniform(0, profile.heartbeat_ms / 1000))


def run_chain(
    profile: BrokerProfile, impl: str, topic: str, rng: random.Random
) -> dict[str, dict[str, Any]]:
    """join-1-2, join-2-3, leave-3-2 and crash-3-2 in one group of member processes."""
    normal_s, crash_s = _timeouts(profile)
    group = Group(profile, impl, topic, CHAIN_PARTITIONS)
    out: dict[str, dict[str, Any]] = {}
    try:
        group.spawn(["m1", "m2", "m3", "m4"])
        group.wait_converged(["m1"], group.go(["m1"]), normal_s)
        dephase(profile, rng)
        out["join-1-2"] = group.wait_converged(["m1", "m2"], group.go(["m2"]), normal_s)
        dephase(profile, rng)
        out["join-2-3"] = group.wait_converged(["m1", "m2", "m3"], group.go(["m3"]), normal_s)
        dephase(profile, rng)
        out["leave-3-2"] = group.wait_converged(["m1", "m2"], group.close("m3"), normal_s)
        group.wait_converged(["m1", "m2", "m4"], group.go(["m4"]), normal_s)
        dephase(profile, rng)
        out["crash-3-2"] = group.wait_converged(["m1", "m2"], group.kill("m4"), crash_s)
    finally:
        group.shutdown()
    return out


def run_cold_join(
    profile: BrokerProfile, impl: str, topic: str, members: int, partitions: int
) -> dict[str, Any]:
    """``members`` members subscribe at once to ``partitions`` partitions."""
    normal_s, _ = _timeouts(profile)
    group = Group(profile, impl, topic, partitions)
    names = [f"m{i + 1}" for i in range(members)]
    try:
        group.spawn(names)
        return group.wait_converged(names, group.go(names), normal_s + 30)
    finally:
        group.shutdown()


def run(brokers: list[tuple[BrokerProfile, int]], size: str) -> dict[str, Any]:
    """The whole convergence benchmark (broker, repetitions); returns the JSON-ready result."""
    cold_members, cold_partitions = (10, 900) if size == "full" else (2, 12)
    result: dict[str, Any] = {
        "chain_partitions": CHAIN_PARTITIONS,
        "cold_join": {"members": cold_members, "partitions": cold_partitions},
        "brokers": {},
    }
    for profile, repeat in brokers:
        chain_topic = _ensure_topic(profile.bootstrap, "bench-conv-6", CHAIN_PARTITIONS)
        cold_topic = _ensure_topic(
            profile.bootstrap, f"bench-conv-{cold_partitions}", cold_partitions
        )
        runs: list[dict[str, Any]] = []
        rng = random.Random(f"{profile.name}-{size}")
        for rep in range(repeat):
            shift = rep % len(IMPLEMENTATIONS)
            for impl in IMPLEMENTATIONS[shift:] + IMPLEMENTATIONS[:shift]:
                chain = run_chain(profile, impl, chain_topic, rng)
                chain["cold-join"] = run_cold_join(
                    profile, impl, cold_topic, cold_members, cold_partitions
                )
                for scenario, outcome in chain.items():
                    runs.append({"impl": impl, "scenario": scenario, "repetition": rep, **outcome})
                log(
                    f"convergence {profile.name} {impl} rep {rep}: "
                    + ", ".join(f"{s} {o['converge_s']:.2f}s" for s, o in chain.items())
                )
        stats: dict[str, dict[str, Any]] = {}
        for scenario in SCENARIOS:
            stats[scenario] = {}
            for impl in IMPLEMENTATIONS:
                mine = [r for r in runs if r["impl"] == impl and r["scenario"] == scenario]
                stats[scenario][impl] = {
                    "converge_s": summary([r["converge_s"] for r in mine]),
                    "callbacks_s": summary([r.get("callbacks_s", 0.0) for r in mine]),
                    "max_unowned_s": summary([r["max_unowned_s"] for r in mine]),
                }
            ours = stats[scenario]["ours"]["converge_s"]["median"]
            stats[scenario]["ratios"] = {
                f"ours/{impl}": ratio(ours, stats[scenario][impl]["converge_s"]["median"])
                for impl in IMPLEMENTATIONS[1:]
            }
        # Keep one timeline per implementation and scenario (the first repetition) for plots.
        timelines = {
            scenario: {
                r["impl"]: r["timeline"]
                for r in runs
                if r["scenario"] == scenario and r["repetition"] == 0
            }
            for scenario in SCENARIOS
        }
        for r in runs:
            r.pop("timeline", None)
        result["brokers"][profile.name] = {
            "repeat": repeat,
            "heartbeat_ms": profile.heartbeat_ms,
            "session_ms": profile.session_ms,
            "runs": runs,
            "stats": stats,
            "timelines": timelines,
        }
    return result


def fast_profile(bootstrap: str) -> BrokerProfile:
    """The 500 ms / 6 s broker."""
    return BrokerProfile("hb-500ms", bootstrap, FAST_HEARTBEAT_MS, FAST_SESSION_MS)


def default_profile(bootstrap: str) -> BrokerProfile:
    """The 5 s / 45 s broker (KIP-848 defaults)."""
    return BrokerProfile("hb-5s", bootstrap, 5000, 45000)
