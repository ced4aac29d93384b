"""KIP-848's headline against the classic protocol, and how convergence and cost grow with size.

``python -m benchmarks.scaling [--size smoke|full] [--bootstrap HOST:PORT]`` runs three parts and
writes ``benchmarks/results/scaling.json`` (``python -m benchmarks`` renders it):

* **headline** (KIP-848's example: 10 members, 900 partitions) on the broker with KIP-848's
  default timers (5 s heartbeat interval, 45 s session timeout): a cold join of 10 busy members,
  then a rolling restart (each member in turn closes and a replacement subscribes; the next step
  starts once the group converged). Members are busy: every loop turn polls, then "processes"
  for ``HEADLINE_BUSY_MS`` (a sleep), so callbacks and a classic member's rejoin wait for the
  next ``poll()`` as in a real application. One member per process (``_member_proc``).
* **growth** (KIP-848's example as stated: 10 consumers, 900 partitions added) on the same
  broker: the same busy members own a topic of 10 partitions, which then gains 900
  (:mod:`benchmarks.growth`).
* **curve**: at 10, 50 and 100 idle members and 900 / 3,000 partitions on the fast broker
  (500 ms / 6 s): the cold join, one member joining (t0 = its ``go``), per-member CPU and memory
  over a steady window, then the joiner SIGKILLed (t0 = the kill). The N base members share
  processes (``_group_proc``, at most ``MEMBERS_PER_PROCESS`` per process, one polling thread
  each); the joiner has its own process so it can be killed alone.

Convergence is :meth:`benchmarks.convergence.Group.wait_converged`'s: every partition owned by
exactly one live member on the callbacks, every member owns something, the broker's describe
says STABLE with the same assignment, ours' members STABLE. Classic members get
``heartbeat.interval.ms`` / ``session.timeout.ms`` equal to the broker's KIP-848 interval and
session timeout, and every implementation the same ``max.poll.interval.ms`` (300 s, the
default); the broker's ``group.initial.rebalance.delay.ms`` is 0. A classic phase that takes
longer than ``CLASSIC_CAP_S`` is recorded as capped and its larger sizes are skipped; a KIP-848
phase that times out is recorded as failed (and the run goes on).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    REPO_ROOT,
    BrokerSet,
    log,
    machine_facts,
    read_results,
    summary,
    topic_partitions,
    warm_topic_for_groups,
    write_result,
)
from benchmarks.convergence import (
    IMPLEMENTATIONS,
    BrokerProfile,
    Child,
    Group,
    _ensure_topic,
    default_profile,
    fast_profile,
)
from benchmarks.growth import growth_part

MEMBERS_PER_PROCESS = 25
HEADLINE_BUSY_MS = 1000
CLASSIC_CAP_S = 60.0
KIP848 = ("ours", "confluent-848")


class SharedGroup(Group):
    """A :class:`Group` whose members may share a process (``benchmarks._group_proc``)."""

    def spawn_shared(self, placement: list[list[str]], timeout_s: float = 180.0) -> None:
        """Start one process per list of member names; wait until every one is built."""
        for names in placement:
            spec = {
                "impl": self.impl,
                "bootstrap": self.profile.bootstrap,
                "group": self.group_id,
                "topic": self.topic,
                "names": names,
                "heartbeat_ms": self.profile.heartbeat_ms,
                "session_ms": self.profile.session_ms,
            }
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks._group_proc", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=REPO_ROOT,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            children = [Child(name, process) for name in names]
            for child in children:
                self.children[child.name] = child
            reader = threading.Thread(target=self._read_shared, args=(children,), daemon=True)
            for child in children:
                child.reader = reader
            reader.start()
        everyone = [n for names in placement for n in names]
        with self.cond:
            ok = self.cond.wait_for(
                lambda: all(self._has(self.children[n], "ready") for n in everyone), timeout_s
            )
        if not ok:
            raise TimeoutError(f"{self.impl}: member processes did not start in {timeout_s} s")

    def _read_shared(self, children: list[Child]) -> None:
        by_name = {child.name: child for child in children}
        stdout = children[0].process.stdout
        assert stdout is not None
        for line in stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self.cond:
                    targets = [by_name[event["m"]]] if "m" in event else children
                    for child in targets:
                        child.events.append(event)
                    self.cond.notify_all()
        with self.cond:
            for child in children:
                if child.dead_at is None:
                    child.dead_at = time.monotonic()
            self.cond.notify_all()

    def go_processes(self, names: list[str]) -> float:
        """``go`` once per process hosting ``names``; returns t0."""
        processes = {id(self.children[n].process): self.children[n] for n in names}
        return self.go([child.name for child in processes.values()])

    def cost(self, names: list[str], window_s: float) -> dict[str, float]:
        """CPU (% of a core) and resident memory (MB above the imports) per member of ``names``."""
        hosts = list({id(self.children[n].process): self.children[n] for n in names}.values())
        first = self._cost_sample(hosts)
        time.sleep(window_s)  # the measurement window itself
        last = self._cost_sample(hosts)
        wall = last[0] - first[0]
        cpu_s = sum(b["cpu_s"] - a["cpu_s"] for a, b in zip(first[1], last[1], strict=True))
        rss = sum(
            b["rss"] - self._ready(h)["base_rss"] for h, b in zip(hosts, last[1], strict=True)
        )
        return {
            "cpu_pct_per_member": 100 * cpu_s / wall / len(names),
            "rss_mb_per_member": rss / 2**20 / len(names),
            "window_s": wall,
            "processes": len(hosts),
        }

    def _ready(self, child: Child) -> dict[str, Any]:
        return next(e for e in child.events if e["ev"] == "ready")

    def _cost_sample(self, hosts: list[Child]) -> tuple[float, list[dict[str, Any]]]:
        counts = [sum(e["ev"] == "cost" for e in h.events) for h in hosts]
        at = time.monotonic()
        for host in hosts:
            host.send("cost")
        with self.cond:
            ok = self.cond.wait_for(
                lambda: all(
                    sum(e["ev"] == "cost" for e in h.events) > c
                    for h, c in zip(hosts, counts, strict=True)
                ),
                30,
            )
            if not ok:
                raise TimeoutError(f"{self.impl}: member processes did not report their cost")
            samples = [[e for e in h.events if e["ev"] == "cost"][-1] for h in hosts]
        return at, samples


def _placement(names: list[str]) -> list[list[str]]:
    step = MEMBERS_PER_PROCESS
    return [names[i : i + step] for i in range(0, len(names), step)]


def _topic(bootstrap: str, name: str, partitions: int) -> str:
    """``_ensure_topic``, patient: a loaded single broker may need minutes for 3,000 leaders."""
    try:
        return _ensure_topic(bootstrap, name, partitions)
    except TimeoutError:
        deadline = time.monotonic() + 300
        while topic_partitions(bootstrap, name) != partitions:  # bounded predicate wait
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
        warm_topic_for_groups(bootstrap, name, partitions, timeout_s=300)
        return name


def _converge(group: Group, live: list[str], t0: float, timeout_s: float) -> dict[str, Any]:
    outcome = group.wait_converged(live, t0, timeout_s)
    outcome.pop("timeline", None)
    outcome.pop("t0", None)
    return outcome


def _timeout(impl: str, normal_s: float) -> float:
    return min(normal_s, CLASSIC_CAP_S) if impl not in KIP848 else normal_s


def run_curve_point(
    profile: BrokerProfile, impl: str, topic: str, partitions: int, members: int, plan: Plan
) -> dict[str, Any]:
    """Cold join, join, cost and crash for ``members`` members of ``impl`` on ``topic``."""
    group = SharedGroup(profile, impl, topic, partitions)
    base = [f"m{i + 1}" for i in range(members)]
    out: dict[str, Any] = {"placement": f"{len(_placement(base))} process(es) + 1 joiner"}
    normal_s = 60.0 + members
    crash_s = profile.session_ms / 1000 + 30
    phase, limit_s = "start", 0.0
    try:
        spawn_started = time.monotonic()
        group.spawn_shared([*_placement(base), ["joiner"]])
        out["spawn_s"] = time.monotonic() - spawn_started
        phase, limit_s = "cold-join", _timeout(impl, normal_s)
        out[phase] = _converge(group, base, group.go_processes(base), limit_s)
        phase, limit_s = "join", _timeout(impl, normal_s)
        out[phase] = _converge(group, [*base, "joiner"], group.go(["joiner"]), limit_s)
        out["cost"] = group.cost(base, plan.window_s)
        if not plan.crash:
            return out
        phase, limit_s = "crash", _timeout(impl, crash_s)
        out[phase] = _converge(group, base, group.kill("joiner"), limit_s)
    except TimeoutError as exc:
        # Classic: the cap. KIP-848: a failure, kept in the results rather than ending the run.
        key = "failed" if impl in KIP848 else "capped"
        out[key] = {"phase": phase, "timeout_s": limit_s, "error": str(exc)}
    finally:
        shutdown_started = time.monotonic()
        group.shutdown()
        out["shutdown_s"] = time.monotonic() - shutdown_started
    return out


def run_curve(profile: BrokerProfile, plan: Plan) -> list[dict[str, Any]]:
    """Every (members, partitions) point for every implementation; classic stops at a cap."""
    rows: list[dict[str, Any]] = []
    capped: set[tuple[str, int]] = set()  # (impl, partitions) that hit the cap
    sizes = plan.curve
    topics = {p: _topic(profile.bootstrap, f"bench-scale-{p}", p) for p in {p for _, p in sizes}}
    for members, partitions in sizes:
        for impl in plan.curve_impls:
            if (impl, partitions) in capped:
                rows.append(
                    {
                        "impl": impl,
                        "members": members,
                        "partitions": partitions,
                        "skipped": "a smaller group already hit the cap or failed",
                    }
                )
                continue
            started = time.monotonic()
            point = run_curve_point(profile, impl, topics[partitions], partitions, members, plan)
            if "capped" in point or "failed" in point:
                capped.add((impl, partitions))
            rows.append(
                {
                    "impl": impl,
                    "members": members,
                    "partitions": partitions,
                    "elapsed_s": time.monotonic() - started,
                    **point,
                }
            )
            log(
                f"scaling {impl} {members}x{partitions}: "
                + ", ".join(
                    f"{k} {point[k]['converge_s']:.2f}s"
                    for k in ("cold-join", "join", "crash")
                    if k in point
                )
                + (" CAPPED" if "capped" in point else "")
                + (f" FAILED {point['failed']}" if "failed" in point else "")
            )
    return rows


def run_headline(
    profile: BrokerProfile, impls: tuple[str, ...], members: int, partitions: int, busy_ms: int
) -> list[dict[str, Any]]:
    """Cold join and rolling restart of busy members, one per process, every implementation."""
    topic = _topic(profile.bootstrap, f"bench-head-{partitions}", partitions)
    rows: list[dict[str, Any]] = []
    for impl in impls:
        group = Group(profile, impl, topic, partitions)
        group.extra_spec = {"busy_ms": busy_ms}
        first = [f"m{i + 1}" for i in range(members)]
        spare = [f"r{i + 1}" for i in range(members)]
        row: dict[str, Any] = {"impl": impl, "steps": []}
        started = time.monotonic()
        limit = _timeout(impl, 120.0)
        try:
            group.spawn([*first, *spare], timeout_s=180)
            row["cold-join"] = _converge(group, first, group.go(first), limit)
            live = list(first)
            rolling_started = time.monotonic()
            for old, new in zip(first, spare, strict=True):
                t0 = group.close(old)
                group.go([new])
                live = [n for n in live if n != old] + [new]
                row["steps"].append(_converge(group, live, t0, limit)["converge_s"])
            row["rolling_wall_s"] = time.monotonic() - rolling_started
        except TimeoutError as exc:  # as in run_curve_point: classic capped, KIP-848 failed
            row["failed" if impl in KIP848 else "capped"] = {"timeout_s": limit, "error": str(exc)}
        finally:
            group.shutdown()
        row["rolling_total_s"] = sum(row["steps"])
        row["step_s"] = summary(row["steps"])
        row["elapsed_s"] = time.monotonic() - started
        log(
            f"headline {impl}: cold join {row.get('cold-join', {}).get('converge_s', -1):.2f}s, "
            f"rolling restart {row['rolling_total_s']:.1f}s over {len(row['steps'])} steps"
        )
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Plan:
    """What one size runs."""

    curve: list[tuple[int, int]]
    curve_impls: tuple[str, ...]
    crash: bool
    window_s: float
    headline: tuple[int, int]
    headline_impls: tuple[str, ...]
    busy_ms: int
    #: (members, partitions at the start, partitions added) of the growth part.
    growth: tuple[int, int, int]


PLANS = {
    "full": Plan(
        curve=[(10, 900), (10, 3000), (50, 900), (50, 3000), (100, 900), (100, 3000)],
        curve_impls=IMPLEMENTATIONS,
        crash=True,
        window_s=5.0,
        headline=(10, 900),
        headline_impls=IMPLEMENTATIONS,
        busy_ms=HEADLINE_BUSY_MS,
        growth=(10, 10, 900),
    ),
    # CI: the harness in a few seconds, ours only (the convergence smoke already runs every
    # implementation's member); no crash (it waits for the 6 s session timeout), one member in
    # the headline part.
    "smoke": Plan(
        curve=[(2, 12)],
        curve_impls=("ours",),
        crash=False,
        window_s=0.3,
        headline=(1, 4),
        headline_impls=("ours",),
        busy_ms=100,
        growth=(1, 2, 2),
    ),
}


PARTS = ("headline", "growth", "curve")


def run_part(brokers: BrokerSet, size: str, part: str, command: str) -> dict[str, Any]:
    """One part (``headline``, ``growth`` or ``curve``) with its own conditions (time, load)."""
    plan = PLANS[size]
    started, load = time.time(), list(os.getloadavg())
    fast = fast_profile(brokers.fast())
    if part == "headline":
        members, partitions = plan.headline
        head = default_profile(brokers.default_timers()) if size == "full" else fast
        out: dict[str, Any] = {
            "members": members,
            "partitions": partitions,
            "busy_ms": plan.busy_ms,
            "heartbeat_ms": head.heartbeat_ms,
            "session_ms": head.session_ms,
            "rows": run_headline(head, plan.headline_impls, members, partitions, plan.busy_ms),
        }
    elif part == "growth":
        head = default_profile(brokers.default_timers()) if size == "full" else fast
        out = growth_part(head, plan.headline_impls, plan.growth, plan.busy_ms)
    else:
        out = {
            "heartbeat_ms": fast.heartbeat_ms,
            "session_ms": fast.session_ms,
            "window_s": plan.window_s,
            "rows": run_curve(fast, plan),
        }
    out["conditions"] = {
        "command": command,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
    }
    return out


def _frame(result: dict[str, Any]) -> dict[str, Any]:
    return {"members_per_process": MEMBERS_PER_PROCESS, "classic_cap_s": CLASSIC_CAP_S, **result}


def run(brokers: BrokerSet, size: str, command: str = "python -m benchmarks") -> dict[str, Any]:
    """Every part; returns the JSON-ready result."""
    return _frame({part: run_part(brokers, size, part, command) for part in PARTS})


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the parts asked for and merges each into ``results/scaling.json`` as soon
    as it is done (the other part's earlier result of the same size is kept)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument("--part", choices=PARTS, action="append", help="default: all")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.scaling " + " ".join(
        [f"--size {args.size}", *(f"--part {p}" for p in args.part or ())]
    )
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    started = time.time()
    try:
        for part in args.part or PARTS:
            result = run_part(brokers, args.size, part, command)
            previous = read_results(DEFAULT_RESULTS_DIR).get("scaling")
            merged = previous["result"] if previous and previous["size"] == args.size else {}
            payload = {
                "benchmark": "scaling",
                "size": args.size,
                "repeat": 1,
                "command": command,
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                "duration_s": time.time() - started,
                "loadavg_before": result["conditions"]["loadavg_before"],
                "loadavg_after": result["conditions"]["loadavg_after"],
                "machine": machine_facts(),
                "external_broker": args.bootstrap is not None,
                "result": _frame({**merged, part: result}),
            }
            log(f"wrote {write_result(DEFAULT_RESULTS_DIR, 'scaling', payload)}")
    finally:
        brokers.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
