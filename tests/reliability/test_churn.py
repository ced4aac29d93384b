"""Churn: 5 member processes, 12 partitions, numbered records flowing while a seeded sequence
of faults hits the group (SIGKILL + restart, graceful leave + join, pauses and network cuts
longer and shorter than the session timeout, broker restarts, an on_revoke slower than the
rebalance timeout). The run is checked with ``consumer.testing.invariants.check`` and the tier's
own checks, and its figures are printed.

CI runs the reduced size (20,000 records, 12 faults). The full size (200,000 records, 50 faults)::

    KGM_RELIABILITY_SIZE=full .venv/bin/python -m pytest tests/reliability -k churn
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from fleet import (
    Fleet,
)
from member_processes import (
    MemberProcess,
)
from reliability_support import (
    CONVERGE_S,
    SESSION_MS,
    ProducedLog,
    SteadyProducer,
    relaunch_broker,
)
from run_checks import (
    check_run,
    zombie_records,
)

from consumer.testing.real.proxy import ProxiedBroker
from consumer.testing.timeline_events import Fault, Processed
from tests.support import (
    wait_until,
)

pytestmark = pytest.mark.reliability

FULL = os.environ.get("KGM_RELIABILITY_SIZE", "").lower() == "full"
RECORDS = 200_000 if FULL else 20_000
FAULTS = 50 if FULL else 12
SEED = int(os.environ.get("KGM_RELIABILITY_SEED", "848"))
SLOTS = ("m1", "m2", "m3", "m4", "m5")
PARTITIONS = 12
REBALANCE_MS = 5_000
SESSION_S = SESSION_MS / 1000
KINDS = (
    "kill",
    "leave_join",
    "pause_long",
    "pause_short",
    "blackhole_long",
    "blackhole_short",
    "broker_restart",
    "slow_revoke",
)


def schedule(count: int, rng: random.Random) -> list[str]:
    """Every kind once, then random kinds; broker restarts at most one in eight."""
    kinds = list(KINDS)
    while len(kinds) < count:
        kind = rng.choice(KINDS)
        if kind != "broker_restart" or kinds.count(kind) < count // 8:
            kinds.append(kind)
    rng.shuffle(kinds)
    return kinds[:count]


class Churn:
    def __init__(self, fleet: Fleet, cluster: ProxiedBroker, workdir: Path, seed: int) -> None:
        self.fleet = fleet
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.to_stable: dict[str, list[float]] = defaultdict(list)
        self.done: Counter[str] = Counter()

    def trigger(self, slot: str) -> Path:
        return self.workdir / f"{slot}.slow-revoke"

    def spawn(self, slot: str) -> MemberProcess:
        return self.fleet.spawn(slot, slow_revoke_trigger=str(self.trigger(slot)),
                                slow_revoke_s=REBALANCE_MS / 1000 + 3)  # fmt: skip

    def victim(self) -> MemberProcess:
        return self.rng.choice(self.fleet.live())

    def others_cover(self, victim: MemberProcess) -> Callable[[], bool]:
        return lambda: self.fleet.converged([m for m in self.fleet.live() if m is not victim])

    def run(self, kind: str) -> None:
        fleet = self.fleet
        victim = self.victim()
        if kind == "kill":
            fleet.kill(victim)
            self.spawn(victim.slot)
        elif kind == "leave_join":
            victim.leave()
            self.spawn(victim.slot)
        elif kind == "pause_long":
            fleet.pause(victim, SESSION_S, until=self.others_cover(victim), max_s=60)
        elif kind == "pause_short":
            fleet.pause(victim, SESSION_S / 3)
        elif kind == "blackhole_long":
            fleet.blackhole(victim, SESSION_S, until=self.others_cover(victim), max_s=60)
        elif kind == "blackhole_short":
            fleet.blackhole(victim, SESSION_S / 3)
        elif kind == "broker_restart":
            down, up = relaunch_broker(self.cluster.broker, hard=self.rng.random() < 0.5)
            fleet.fault("broker_restart", None, down, up)
        elif kind == "slow_revoke":
            slow = victim
            self.trigger(slow.slot).touch()
            other = self.rng.choice([m for m in fleet.live() if m is not slow])
            other.leave()
            self.spawn(other.slot)
            fleet.fault_counts["slow_revoke"] += 1
        self.done[kind] += 1
        self.to_stable[kind].append(fleet.wait_converged(CONVERGE_S + 2 * SESSION_S))


def duplicate_causes(fleet: Fleet, rebalance_ms: int) -> Counter[str]:
    """For each record processed more than once: how the member that processed it first had
    died in between (kill, broker fence with its reason, isolating fault), or that one side was a
    zombie record (processed by a member the broker had already fenced, before it learned so)."""
    timeline = fleet.timeline(rebalance_ms)
    events = timeline.events()
    zombies = zombie_records(events, SESSION_MS)
    by_key: dict[tuple[int, int], list[Processed]] = defaultdict(list)
    for ev in events:
        if isinstance(ev, Processed):
            by_key[(ev.partition, ev.offset)].append(ev)
    faults = [ev for ev in events if isinstance(ev, Fault) and ev.member is not None]
    reasons = {(n, at): r for n, at, r in fleet.broker_fences()}
    causes: Counter[str] = Counter()
    for runs in by_key.values():
        runs.sort(key=lambda p: p.at_ms)
        for before, again in zip(runs, runs[1:], strict=False):
            cause = "unexplained"
            if before in zombies or again in zombies:
                causes["zombie: processed after a broker-side fence, before the member knew"] += 1
                continue
            for fault in faults:
                if fault.member == before.member and before.at_ms <= fault.start_ms <= again.at_ms:
                    cause = fault.kind
                    if fault.kind == "fence":
                        cause = "fence: " + reasons.get((fault.member, fault.start_ms), "?")
                    break
            causes[cause] += 1
    return causes


@pytest.mark.timeout(3600 if FULL else 300)
def test_churn(
    make_fleet: Callable[..., tuple[Fleet, ProducedLog]],
    cluster: ProxiedBroker,
    workdir: Path,
    show: Callable[[str], None],
) -> None:
    started = time.monotonic()
    fleet, produced = make_fleet(PARTITIONS, config={"max.poll.interval.ms": REBALANCE_MS})
    churn = Churn(fleet, cluster, workdir, SEED)
    plan = schedule(FAULTS, churn.rng)
    produced.produce(RECORDS // 10)
    for slot in SLOTS:
        churn.spawn(slot)
    fleet.wait_converged(CONVERGE_S * 2)
    producer = SteadyProducer(produced, RECORDS - RECORDS // 10, seconds=len(plan) * 9.0)
    producer.start()
    for number, kind in enumerate(plan, start=1):
        churn.run(kind)
        print(f"fault {number}/{len(plan)} {kind}: STABLE after {churn.to_stable[kind][-1]:.1f} s")
    producer.join(600)
    assert producer.done.is_set(), "the producer did not finish"
    drained = fleet.wait_all_processed(produced, 300)
    fleet.wait_converged()
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=REBALANCE_MS)
    causes = duplicate_causes(fleet, REBALANCE_MS)
    worst = {k: round(max(v), 1) for k, v in churn.to_stable.items()}
    result.extra.update(
        size="full" if FULL else "ci",
        seed=SEED,
        max_to_stable_s=max(worst.values()),
        to_stable_by_kind=worst,
        duplicate_causes=dict(causes),
        drain_s=round(drained, 1),
        run_s=round(time.monotonic() - started),
        members=len(fleet.members),
    )
    result.faults = dict(churn.done)
    show(result.counts_line("churn"))
    assert sum(churn.done.values()) == FAULTS
    assert not result.problems, "\n".join(result.problems[:30])
    assert causes.get("unexplained", 0) == 0, causes
    wait_until(lambda: not fleet.live(), 30, "every member to exit")
