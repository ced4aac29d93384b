"""Cost per member: RSS and CPU of N idle members in one process, and a core microbenchmark.

Idle members (one partition each, no records) only heartbeat. Each configuration runs in a
fresh child process (``benchmarks._cost_proc``), measured over a steady-state
window after the group settled; a child with 0 members (the imports only) is the baseline.
Per member = (process - baseline) / N. confluent-kafka's KIP-848 consumer is measured the same
way for context.

The microbenchmark times the sans-I/O core alone: ``Member.handle(HeartbeatSucceeded(...))`` plus
``Member.poll(now_ms)`` for a STABLE member, driven by a manual clock (timed with
``time.perf_counter`` around exactly those two calls, best of 5 rounds). There is no
confluent-kafka equivalent (librdkafka's member is C code inside its own threads).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from benchmarks.common import REPO_ROOT, create_topic, log, summary
from consumer.member import AppPolled, HeartbeatSucceeded, MemberState, SendHeartbeat
from consumer.testing.sim.harness import GroupHarness

IMPLEMENTATIONS = ("ours", "confluent-848")


def measure(
    bootstrap: str,
    impl: str,
    members: int,
    warmup_s: float,
    window_s: float,
    quiet_max_s: float | None = None,
) -> Any:
    """One child process with ``members`` idle members of ``impl``."""
    topic = f"bench-cost-{members}-{uuid.uuid4().hex[:8]}"
    if members:
        create_topic(bootstrap, topic, members)
    spec = {
        "impl": impl,
        "members": members,
        "bootstrap": bootstrap,
        "topic": topic,
        "warmup_s": warmup_s,
        "window_s": window_s,
        "quiet_max_s": quiet_max_s,
    }
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks._cost_proc", json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=300 + members * 5,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"cost child failed ({impl}, {members}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def microbenchmark(partitions: int, number: int) -> dict[str, float]:
    """µs per handle(HeartbeatSucceeded) + poll for a STABLE member owning ``partitions``."""
    harness = GroupHarness()
    harness.sim.heartbeat_interval_ms = 5_000
    harness.sim.create_topic("foo", partitions)
    driver = harness.add_member("a")
    harness.run_until(harness.all_stable, max_ms=60_000)
    member = driver.member
    clock = harness.clock
    assert member.state is MemberState.STABLE
    epoch, member_id = member.member_epoch, member.member_id

    def one_round(number: int) -> float:
        """Seconds spent in handle(HeartbeatSucceeded) + poll over ``number`` heartbeats."""
        spent = 0.0
        for _ in range(number):
            now = clock.advance(5_000)
            member.handle(AppPolled(), now)  # the application is alive (not timed)
            commands, _ = member.poll(now)
            request_id = next(c.request_id for c in commands if isinstance(c, SendHeartbeat))
            answer = HeartbeatSucceeded(request_id, epoch, 5_000, None, member_id)
            start = time.perf_counter()
            member.handle(answer, now)
            member.poll(now)
            spent += time.perf_counter() - start
        return spent

    one_round(min(number, 200))  # warm-up
    rounds = [one_round(number) / number * 1e6 for _ in range(5)]
    assert member.state is MemberState.STABLE
    return {"partitions": partitions, "us_per_heartbeat": min(rounds), **_prefixed(rounds)}


def _prefixed(rounds: list[float]) -> dict[str, float]:
    stats = summary(rounds)
    return {f"rounds_{k}": float(v) for k, v in stats.items()}


def run(profiles: list[tuple[str, str, int]], size: str, repeat: int) -> dict[str, Any]:
    """``profiles``: (name, bootstrap, heartbeat_ms) of each broker; returns JSON-ready results."""
    counts = (1, 10, 50) if size == "full" else (1,)
    warmup_s, window_s = (5.0, 20.0) if size == "full" else (0.5, 1.0)
    result: dict[str, Any] = {
        "member_counts": list(counts),
        "window_s": window_s,
        "targets": {"rss_mb_per_member": 20.0, "cpu_pct_per_member": 1.0},
        "brokers": {},
    }
    for name, bootstrap, heartbeat_ms in profiles:
        rows: list[dict[str, Any]] = []
        for rep in range(repeat):
            base = measure(bootstrap, "ours", 0, 0.0, window_s)
            base["repetition"] = rep
            rows.append(base)
            for n in counts:
                for impl in IMPLEMENTATIONS:
                    row = measure(bootstrap, impl, n, warmup_s, window_s)
                    row["repetition"] = rep
                    row["rss_mb_per_member"] = (row["rss_mb"] - base["rss_mb"]) / n
                    row["cpu_pct_per_member"] = (row["cpu_pct"] - base["cpu_pct"]) / n
                    rows.append(row)
                    log(
                        f"member cost {name} {impl} N={n}: "
                        f"{row['rss_mb_per_member']:.1f} MB, "
                        f"{row['cpu_pct_per_member']:.2f} % core per member"
                    )
        stats: dict[str, Any] = {}
        for n in counts:
            for impl in IMPLEMENTATIONS:
                mine = [r for r in rows if r["members"] == n and r["impl"] == impl]
                stats[f"{impl}/{n}"] = {
                    "rss_mb_per_member": summary([r["rss_mb_per_member"] for r in mine]),
                    "cpu_pct_per_member": summary([r["cpu_pct_per_member"] for r in mine]),
                    "rss_mb": summary([r["rss_mb"] for r in mine]),
                    "cpu_pct": summary([r["cpu_pct"] for r in mine]),
                }
        result["brokers"][name] = {"heartbeat_ms": heartbeat_ms, "runs": rows, "stats": stats}
    budget = 20_000 if size == "full" else 500  # partition-heartbeats per round
    result["microbenchmark"] = [microbenchmark(p, max(20, budget // p)) for p in (1, 100, 1000)]
    return result
