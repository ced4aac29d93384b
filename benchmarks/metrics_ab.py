"""The member metrics on and off: throughput and idle CPU, this tree against itself, same run.

The member's rebalance, heartbeat and commit metrics (``Consumer.metrics()``, also in the
``stats_cb`` JSON) have no switch: the Java client's only counterpart,
``metrics.recording.level``, chooses between INFO, DEBUG and TRACE sensors, and its coordinator
metrics are INFO, which is always recorded. So "off" is this tree copied with the recorder
stubbed out (:data:`STUBBED_RECORDER` replaces ``consumer/_runtime/metrics.py``: its feeding
methods do nothing and ``metrics()`` returns a member that never ran), and the two trees run
alternately, each in a fresh child process, on the same broker:

* throughput: ``consumer.Consumer`` with ``poll()`` and with ``consume(500)`` on the throughput
  benchmark's topics (:func:`benchmarks.throughput.run_once` in ``benchmarks._throughput_proc``);
* idle CPU per member: N idle members (N = 1 and 10) in one process
  (``benchmarks._cost_proc``, as ``benchmarks.idle_ab`` runs it).

``python -m benchmarks.metrics_ab [--size smoke|full] [--repeat N] [--members 1,10] [--window 15]
[--bootstrap HOST:PORT] [--baseline-tree DIR]`` writes ``benchmarks/results/metrics_ab.json``
(the next ``python -m benchmarks`` run puts it in the report, as :func:`section`).
Without ``--baseline-tree`` the stubbed copy is made in a temporary folder.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    FAST_HEARTBEAT_MS,
    REPO_ROOT,
    BrokerSet,
    log,
    machine_facts,
    ratio,
    summary,
    write_result,
)
from benchmarks.idle_ab import measure as measure_idle
from benchmarks.throughput import ensure_topic, workloads
from consumer._bridge.last_poll import monotonic_ms
from consumer._runtime.metrics import MetricsRecorder
from consumer.member import AppPolled, HeartbeatSucceeded, MemberState, SendHeartbeat
from consumer.testing.sim.harness import GroupHarness

#: The recorder file replaced in the "off" tree, relative to the tree's root.
RECORDER_PATH = Path("consumer/_runtime/metrics.py")
STUBBED_RECORDER = '''"""Metrics recording stubbed out (``benchmarks.metrics_ab``'s off tree)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from consumer.member import MemberState
from consumer.member.metrics import MemberMetrics

__all__ = ["MetricsRecorder"]


class MetricsRecorder:
    """Records nothing; ``snapshot`` reads a member that never ran."""

    def __init__(self, clock_ms: Callable[[], int], state: MemberState) -> None:
        self._never_ran = MemberMetrics(0, state)

    def commands_issued(self, commands: Iterable[object]) -> None:
        """Not recorded."""

    def input_received(self, event: object, now_ms: int) -> None:
        """Not recorded."""

    def state_changed(self, state: MemberState) -> None:
        """Not recorded."""

    def snapshot(self, member_epoch: int) -> dict[str, float]:
        """The metrics of a member that never ran."""
        return self._never_ran.snapshot(0, member_epoch)
'''
VARIANTS = ("on", "off")
THROUGHPUT_WAYS = ("ours-poll", "ours-consume")


def _recorder_methods(source: str) -> set[str]:
    """The method names of class ``MetricsRecorder`` in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "MetricsRecorder":
            return {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
    raise ValueError("no class MetricsRecorder")


def make_stubbed_tree(dest: Path) -> Path:
    """Copy this tree's ``consumer`` and ``benchmarks`` to ``dest`` with metrics stubbed out.

    Refuses (``ValueError``) if the real recorder's methods differ from the stub's, so a change
    to the recorder cannot silently leave the "off" tree measuring something else.
    """
    real = (REPO_ROOT / RECORDER_PATH).read_text()
    if _recorder_methods(real) != _recorder_methods(STUBBED_RECORDER):
        raise ValueError(
            f"{RECORDER_PATH}'s MetricsRecorder methods {sorted(_recorder_methods(real))} differ "
            f"from the stub's {sorted(_recorder_methods(STUBBED_RECORDER))}: update the stub"
        )
    ignore = shutil.ignore_patterns("__pycache__", "results")
    for package in ("consumer", "benchmarks"):
        shutil.copytree(REPO_ROOT / package, dest / package, ignore=ignore, dirs_exist_ok=True)
    (dest / RECORDER_PATH).write_text(STUBBED_RECORDER)
    return dest


def _child_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root)}


def throughput_once(root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One ``benchmarks._throughput_proc`` run with the tree at ``root``."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks._throughput_proc", json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=root,
        env=_child_env(root),
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"throughput child failed ({spec['impl']}):\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def recorder_cost(number: int = 20_000, rounds: int = 5) -> dict[str, float]:
    """CPU µs the recorder adds per heartbeat, and per ``metrics()`` snapshot (best round).

    Per heartbeat the loop tells the recorder what a STABLE member's turn issued (the commands
    of ``Member.poll``, a ``SendHeartbeat`` among them), the answer and an ``AppPolled``: those
    three calls are timed with the thread's CPU clock, on a member of the simulated group.
    """
    harness = GroupHarness()
    harness.sim.create_topic("foo", 1)
    member = harness.add_member("a").member
    harness.run_until(harness.all_stable, max_ms=60_000)
    now_ms = harness.clock.advance(5_000)
    member.handle(AppPolled(), now_ms)
    commands, _ = member.poll(now_ms)
    beat = next(c for c in commands if isinstance(c, SendHeartbeat))
    answer = HeartbeatSucceeded(beat.request_id, member.member_epoch, 5_000, None, member.member_id)
    polled = AppPolled(polled_at_ms=now_ms)
    recorder = MetricsRecorder(monotonic_ms, MemberState.STABLE)

    def heartbeats_us() -> float:
        start_ns = time.thread_time_ns()
        for _ in range(number):
            recorder.input_received(polled, now_ms)
            recorder.commands_issued(commands)
            recorder.input_received(answer, now_ms)
        return (time.thread_time_ns() - start_ns) / number / 1000

    def snapshots_us() -> float:
        count = max(number // 20, 1)
        start_ns = time.thread_time_ns()
        for _ in range(count):
            recorder.snapshot(member.member_epoch)
        return (time.thread_time_ns() - start_ns) / count / 1000

    per_heartbeat = min(heartbeats_us() for _ in range(rounds))
    per_snapshot = min(snapshots_us() for _ in range(rounds))
    return {
        "us_per_heartbeat": per_heartbeat,
        "us_per_snapshot": per_snapshot,
        # At the 500 ms broker's two heartbeats a second.
        "pct_core_per_member": per_heartbeat * 1000 / FAST_HEARTBEAT_MS / 1e6 * 100,
    }


def _rotated(rep: int) -> tuple[str, ...]:
    shift = rep % len(VARIANTS)
    return VARIANTS[shift:] + VARIANTS[:shift]


def run(
    bootstrap: str,
    trees: dict[str, Path],
    size: str,
    repeat: int,
    counts: list[int],
    window_s: float,
) -> dict[str, Any]:
    """Every repetition: the throughput runs, then the idle runs, the trees alternating."""
    works = [(work, ensure_topic(bootstrap, work)) for work in workloads(size)]
    runs: list[dict[str, Any]] = []
    idle: list[dict[str, Any]] = []
    for rep in range(repeat):
        for work, topic in works:
            for index, impl in enumerate(THROUGHPUT_WAYS):
                for variant in _rotated(rep + index):
                    spec: dict[str, Any] = {"impl": impl, "bootstrap": bootstrap}
                    spec |= {"topic": topic, "total": work.count, "size": work.size}
                    row = throughput_once(trees[variant], spec)
                    row |= {"workload": work.label, "variant": variant, "repetition": rep}
                    runs.append(row)
                    log(
                        f"metrics {variant} {work.label} {impl}: "
                        f"{row['records_per_s']:,.0f} rec/s ({row['consumed']}/{work.count})"
                    )
        for members in counts:
            for variant in _rotated(rep + members):
                cpu = measure_idle(trees[variant], bootstrap, "ours", members, window_s)
                load = os.getloadavg()[0]
                idle.append(
                    {
                        "variant": variant,
                        "members": members,
                        "repetition": rep,
                        "cpu_pct_per_member": cpu,
                        "load1": load,
                    }
                )
                log(f"metrics {variant} idle N={members}: {cpu:.3f} % per member (load {load:.1f})")
    return {
        "heartbeat_ms": FAST_HEARTBEAT_MS,
        "recorder": recorder_cost(),
        "window_s": window_s,
        "member_counts": counts,
        "throughput": _throughput_summary(works, runs),
        "idle": {"rows": idle, "stats": _idle_stats(idle, counts)},
    }


def _throughput_summary(works: Sequence[Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    summaries: dict[str, Any] = {}
    for work, topic in works:
        mine = [r for r in runs if r["workload"] == work.label]
        stats = {
            f"{impl}/{variant}": summary(
                [r["records_per_s"] for r in mine if r["impl"] == impl and r["variant"] == variant]
            )
            for impl in THROUGHPUT_WAYS
            for variant in VARIANTS
        }
        cpu = {
            f"{impl}/{variant}": summary(
                [
                    r["process_cpu_us_per_record"]
                    for r in mine
                    if r["impl"] == impl and r["variant"] == variant
                ]
            )
            for impl in THROUGHPUT_WAYS
            for variant in VARIANTS
        }
        summaries[work.label] = {
            "topic": topic,
            "count": work.count,
            "size": work.size,
            "runs": mine,
            "stats": stats,
            "process_cpu_us_per_record": cpu,
            "on_over_off": {
                impl: ratio(stats[f"{impl}/on"]["median"], stats[f"{impl}/off"]["median"])
                for impl in THROUGHPUT_WAYS
            },
        }
    return summaries


def _idle_stats(rows: list[dict[str, Any]], counts: list[int]) -> dict[str, Any]:
    return {
        f"{members}/{variant}": summary(
            [
                r["cpu_pct_per_member"]
                for r in rows
                if r["members"] == members and r["variant"] == variant
            ]
        )
        for members in counts
        for variant in VARIANTS
    }


def section(payload: dict[str, Any], _out: Path) -> list[str]:
    """The report's section: throughput and idle CPU per member, metrics on and off."""
    result = payload["result"]
    lines = [
        "## Member metrics on and off",
        "",
        "The member's metrics (`Consumer.metrics()`, also in the `stats_cb` JSON) have no "
        "switch (Java's `metrics.recording.level` does not turn its coordinator metrics off "
        "either), so *off* is this revision with the recorder stubbed out "
        "(`benchmarks.metrics_ab.STUBBED_RECORDER`), *on* the revision as it is; the two trees "
        "alternate, each run in a fresh process, on the same "
        f"{result['heartbeat_ms']} ms broker; {payload['repeat']} repetition(s) "
        f"(`{payload['command']}`). Every value is listed.",
        "",
        "*CPU µs / record*: CPU time of the whole child process (every thread) from the "
        "consumer's creation to its close over the records consumed (median); unlike records/s "
        "it hardly depends on what else the machine runs.",
        "",
        "| throughput | way | on: median records/s | off: median records/s | on / off | on: all "
        "| off: all | CPU µs / record: on | off |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, work in result["throughput"].items():
        for impl in THROUGHPUT_WAYS:
            on, off = work["stats"][f"{impl}/on"], work["stats"][f"{impl}/off"]
            cpu = work["process_cpu_us_per_record"]
            lines.append(
                f"| {work['count']:,} × {label} | {impl} | {on['median']:,.0f} | "
                f"{off['median']:,.0f} | {work['on_over_off'][impl]:.2f} | "
                f"{_listed(work['runs'], impl, 'on')} | {_listed(work['runs'], impl, 'off')} | "
                f"{cpu[f'{impl}/on']['median']:.1f} | {cpu[f'{impl}/off']['median']:.1f} |"
            )
    lines += [
        "",
        f"Idle CPU per member ({result['window_s']:.0f} s window after the group settled; % of "
        "one core):",
        "",
        "| members | on: median | off: median | on − off | on: all | off: all |",
        "|---|---|---|---|---|---|",
    ]
    stats, rows = result["idle"]["stats"], result["idle"]["rows"]
    for members in result["member_counts"]:
        on, off = stats[f"{members}/on"]["median"], stats[f"{members}/off"]["median"]
        cells = [
            ", ".join(
                f"{r['cpu_pct_per_member']:.3f}"
                for r in rows
                if r["members"] == members and r["variant"] == variant
            )
            for variant in VARIANTS
        ]
        lines.append(
            f"| {members} | {on:.3f} % | {off:.3f} % | {on - off:+.3f} | {cells[0]} | {cells[1]} |"
        )
    recorder = result.get("recorder")
    if recorder:
        lines += [
            "",
            "What the recorder itself costs (`benchmarks.metrics_ab.recorder_cost`: its three "
            "calls per heartbeat, and one `metrics()` snapshot, timed with the thread's CPU "
            f"clock, best of 5 rounds): **{recorder['us_per_heartbeat']:.1f} µs per heartbeat**, "
            f"{recorder['pct_core_per_member']:.4f} % of a core per member at two heartbeats a "
            f"second; {recorder['us_per_snapshot']:.0f} µs per snapshot (`metrics()`, and once "
            "per `stats_cb` report). Nothing per record.",
        ]
    lines.append("")
    return lines


def _listed(runs: list[dict[str, Any]], impl: str, variant: str) -> str:
    return ", ".join(
        f"{r['records_per_s'] / 1000:.0f}k"
        for r in runs
        if r["impl"] == impl and r["variant"] == variant
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_ab", description=__doc__)
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--members", default="1,10", help="idle member counts, comma-separated")
    parser.add_argument("--window", type=float, default=15.0, help="idle CPU window, seconds")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--baseline-tree", type=Path, default=None, help="the 'off' tree")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.members.split(",")]
    command = "python -m benchmarks.metrics_ab " + " ".join(sys.argv[1:] if argv is None else argv)
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    with tempfile.TemporaryDirectory(prefix="metrics-off-") as scratch:
        off_tree = args.baseline_tree or make_stubbed_tree(Path(scratch))
        started, load = time.time(), list(os.getloadavg())
        try:
            trees = {"on": REPO_ROOT, "off": off_tree}
            result = run(brokers.fast(), trees, args.size, args.repeat, counts, args.window)
        finally:
            brokers.close()
    payload = {
        "benchmark": "metrics_ab",
        "size": args.size,
        "repeat": args.repeat,
        "command": command,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": args.bootstrap is not None,
        "result": result,
    }
    log(f"wrote {write_result(args.results_dir, 'metrics_ab', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
