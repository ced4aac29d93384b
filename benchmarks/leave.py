"""Graceful leave, many rounds: ours against confluent-kafka's KIP-848 consumer, interleaved.

``python -m benchmarks.leave [--rounds N] [--heartbeat-ms 500|5000] [--bootstrap HOST:PORT]`` keeps
two members of one
group running (each in its own process, ``benchmarks._member_proc``) and, per round, lets a third
member join, waits for the group to converge, waits a random fraction of a heartbeat interval (so
the leave lands at a random phase of the survivors' heartbeat cycles), then closes the third
member and times:

* ``converge_s``: from the moment the leaving member's application starts ``close()`` until the
  two survivors own every partition (callback stamps; ours: their STABLE state) and the broker's
  ConsumerGroupDescribe agrees, as :mod:`benchmarks.convergence` measures ``leave-3-2``;
* ``close_s``: how long that ``close()`` call took.

The implementations alternate round by round on the same broker, so machine load affects both
alike. ``--heartbeat-ms 5000`` runs on a broker with KIP-848's default timers (5 s / 45 s) instead
of the 500 ms one. Writes ``benchmarks/results/leave.json`` (``leave_5s.json`` at 5 s);
``python -m benchmarks`` shows it in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    DEFAULT_TIMER_OVERRIDES,
    FAST_HEARTBEAT_MS,
    FAST_SESSION_MS,
    BrokerSet,
    log,
    machine_facts,
    summary,
    write_result,
)
from benchmarks.convergence import CHAIN_PARTITIONS, BrokerProfile, Group, _ensure_topic, dephase

IMPLEMENTATIONS = ("ours", "confluent-848")


class LeaveRounds:
    """Two survivors of one implementation, and a third member that joins and leaves."""

    def __init__(self, profile: BrokerProfile, impl: str, topic: str, rounds: int) -> None:
        self._group = Group(profile, impl, topic, CHAIN_PARTITIONS)
        self._rounds = rounds
        self._next = 0
        self._timeout_s = 30 + 6 * profile.heartbeat_ms / 1000

    def start(self) -> None:
        """Spawn the survivors and every leaver up front, and let the survivors converge."""
        group = self._group
        group.spawn(["s1", "s2", *(f"l{i}" for i in range(self._rounds))])
        group.wait_converged(["s1"], group.go(["s1"]), self._timeout_s)
        group.wait_converged(["s1", "s2"], group.go(["s2"]), self._timeout_s)

    def one_round(self, profile: BrokerProfile, rng: random.Random) -> dict[str, float]:
        """The next leaver joins, the group converges, it leaves at a random phase."""
        group = self._group
        leaver = f"l{self._next}"
        self._next += 1
        group.wait_converged(["s1", "s2", leaver], group.go([leaver]), self._timeout_s)
        dephase(profile, rng)
        t0 = group.close(leaver)
        outcome = group.wait_converged(["s1", "s2"], t0, self._timeout_s)
        closed = _stamp(group, leaver, "closed", self._timeout_s)
        return {
            "converge_s": outcome["converge_s"],
            "callbacks_s": outcome["callbacks_s"],
            "close_s": closed - t0,
        }

    def stop(self) -> None:
        """Stop every member process."""
        self._group.shutdown()


def _stamp(group: Group, name: str, kind: str, timeout_s: float) -> float:
    """When member ``name`` reported event ``kind`` (waits for it, bounded)."""
    child = group.children[name]
    with group.cond:
        group.cond.wait_for(lambda: any(e["ev"] == kind for e in child.events), timeout_s)
        stamps = [e["at"] for e in child.events if e["ev"] == kind]
    if not stamps:
        raise TimeoutError(f"{group.impl}: member {name} did not report {kind!r}")
    return float(stamps[-1])


def run(bootstrap: str, rounds: int, heartbeat_ms: int = FAST_HEARTBEAT_MS) -> dict[str, Any]:
    """``rounds`` leaves per implementation, alternating; returns the JSON-ready result."""
    if heartbeat_ms == FAST_HEARTBEAT_MS:
        profile = BrokerProfile("hb-500ms", bootstrap, FAST_HEARTBEAT_MS, FAST_SESSION_MS)
    else:
        session_ms = int(DEFAULT_TIMER_OVERRIDES["group.consumer.session.timeout.ms"])
        profile = BrokerProfile(f"hb-{heartbeat_ms // 1000}s", bootstrap, heartbeat_ms, session_ms)
    topic = _ensure_topic(bootstrap, "bench-conv-6", CHAIN_PARTITIONS)
    rng = random.Random(f"leave-{rounds}")
    setups = {impl: LeaveRounds(profile, impl, topic, rounds) for impl in IMPLEMENTATIONS}
    samples: dict[str, list[dict[str, float]]] = {impl: [] for impl in IMPLEMENTATIONS}
    try:
        for setup in setups.values():
            setup.start()
        for index in range(rounds):
            order = IMPLEMENTATIONS if index % 2 == 0 else IMPLEMENTATIONS[::-1]
            for impl in order:
                sample = setups[impl].one_round(profile, rng)
                samples[impl].append(sample)
                log(
                    f"leave round {index} {impl}: converged {sample['converge_s']:.3f} s, "
                    f"close() {sample['close_s']:.3f} s"
                )
    finally:
        for setup in setups.values():
            setup.stop()
    stats = {
        impl: {key: summary([s[key] for s in rows]) for key in ("converge_s", "close_s")}
        for impl, rows in samples.items()
    }
    ours, theirs = ([s["converge_s"] for s in samples[impl]] for impl in ("ours", "confluent-848"))
    return {
        "rounds": rounds,
        "heartbeat_ms": profile.heartbeat_ms,
        "samples": samples,
        "stats": stats,
        "mean_difference_s": statistics.fmean(ours) - statistics.fmean(theirs),
        "stdev_s": {"ours": _stdev(ours), "confluent-848": _stdev(theirs)},
    }


def _stdev(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.leave")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        choices=(FAST_HEARTBEAT_MS, 5000),
        default=FAST_HEARTBEAT_MS,
        help="the broker's heartbeat interval: 500 (the fast broker) or 5000 (KIP-848's default)",
    )
    args = parser.parse_args()
    fast = args.heartbeat_ms == FAST_HEARTBEAT_MS
    brokers = BrokerSet(fast_bootstrap=args.bootstrap if fast else None)
    started = time.time()
    load = list(os.getloadavg())
    try:
        bootstrap = brokers.fast() if fast else (args.bootstrap or brokers.default_timers())
        result = run(bootstrap, args.rounds, args.heartbeat_ms)
    finally:
        brokers.close()
    name = "leave" if fast else "leave_5s"
    flag = "" if fast else f" --heartbeat-ms {args.heartbeat_ms}"
    payload = {
        "benchmark": name,
        "size": "full",
        "repeat": args.rounds,
        "command": f"python -m benchmarks.leave --rounds {args.rounds}{flag}",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": args.bootstrap is not None,
        "result": result,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, name, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
