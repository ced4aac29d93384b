"""Throughput of one record size: this tree, confluent-kafka and a baseline tree, alternating.

``python -m benchmarks.throughput_ab --baseline-tree DIR [--bootstrap HOST:PORT] [--repeat 3]
[--shapes poll,consume] [--prefetch unbounded] [--count 1000000] [--record-bytes 100]
[--name throughput_ab]`` runs, per repetition and call shape, three ways in an order that
rotates each repetition: ``ours`` (this tree's ``consumer``), ``confluent`` (confluent-kafka's
KIP-848 consumer) and ``baseline`` (the ``consumer`` package of ``--baseline-tree``). Every run
is :func:`benchmarks.throughput.run_once` in a fresh child process
(:mod:`benchmarks._throughput_proc`, ``PYTHONPATH`` = the tree), so each tree runs its own code
on the same broker and topic. It prints every run and, per shape and way, the median rate, the
polling thread's and the process's CPU per record, and the ratios to confluent's (of the
medians, and the median of each repetition's own ratio), and writes
``benchmarks/results/<name>.json`` with every run and the load average around it. This is the
check for a change to the per-record path: the rows of :data:`benchmarks.throughput.PREFETCH`
``unbounded`` at 100 B, which the full benchmark runs only among many others.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    REPO_ROOT,
    BrokerSet,
    log,
    machine_facts,
    ratio,
    summary,
    write_result,
)
from benchmarks.throughput import PREFETCH, Workload, ensure_topic

#: The ways compared per call shape: (way, implementation of benchmarks.throughput, tree).
WAYS = ("ours", "confluent", "baseline")
_IMPLS = {
    "poll": {"ours": "ours-poll", "confluent": "confluent-848-poll", "baseline": "ours-poll"},
    "consume": {
        "ours": "ours-consume",
        "confluent": "confluent-848-consume",
        "baseline": "ours-consume",
    },
}


def _child(tree: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One run of ``spec`` in a fresh process of ``tree``; its JSON result."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks._throughput_proc", json.dumps(spec)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"throughput child failed in {tree}:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(
    baseline: Path,
    bootstrap: str,
    work: Workload,
    *,
    shapes: list[str],
    prefetch: str,
    repeat: int,
) -> dict[str, Any]:
    """Every run, by shape and way, and their summaries."""
    topic = ensure_topic(bootstrap, work)
    trees = {"ours": REPO_ROOT, "confluent": REPO_ROOT, "baseline": baseline}
    runs: list[dict[str, Any]] = []
    for rep in range(repeat):
        order = list(WAYS[rep % len(WAYS) :] + WAYS[: rep % len(WAYS)])
        for shape in shapes:
            for way in order:
                spec = {
                    "impl": _IMPLS[shape][way],
                    "bootstrap": bootstrap,
                    "topic": topic,
                    "total": work.count,
                    "size": work.size,
                    "overrides": PREFETCH[prefetch],
                }
                load_before = os.getloadavg()[0]
                outcome = _child(trees[way], spec)
                outcome.update(shape=shape, way=way, repetition=rep, load_before=load_before)
                outcome["load_after"] = os.getloadavg()[0]
                runs.append(outcome)
                log(
                    f"{shape} {way} rep {rep}: {outcome['records_per_s']:,.0f} rec/s "
                    f"({outcome['consumed']}/{work.count}), thread "
                    f"{outcome['thread_cpu_us_per_record']:.3f} us/rec, process "
                    f"{outcome['process_cpu_us_per_record']:.3f} us/rec, load {load_before:.1f}"
                )
    return {"runs": runs, "summaries": {shape: summarise(runs, shape) for shape in shapes}}


def summarise(runs: list[dict[str, Any]], shape: str) -> dict[str, Any]:
    """Per way: rate, CPU per record and start-up delay; ratios to confluent's."""
    mine = [r for r in runs if r["shape"] == shape]

    def stats(way: str, key: str) -> dict[str, float | int]:
        return summary([r[key] for r in mine if r["way"] == way and r.get(key) is not None])

    ways: dict[str, Any] = {}
    for way in WAYS:
        ways[way] = {
            "records_per_s": stats(way, "records_per_s"),
            "steady_records_per_s": stats(way, "steady_records_per_s"),
            "thread_cpu_us_per_record": stats(way, "thread_cpu_us_per_record"),
            "process_cpu_us_per_record": stats(way, "process_cpu_us_per_record"),
            "first_record_after_assign_s": summary(
                [
                    r["first_record_s"] - r["assigned_s"]
                    for r in mine
                    if r["way"] == way and r.get("first_record_s") is not None
                ]
            ),
        }
    base = float(ways["confluent"]["records_per_s"]["median"])
    ratios: dict[str, Any] = {}
    for way in ("ours", "baseline"):
        paired = [
            ratio(mine_run["records_per_s"], theirs["records_per_s"])
            for mine_run in mine
            if mine_run["way"] == way
            for theirs in mine
            if theirs["way"] == "confluent" and theirs["repetition"] == mine_run["repetition"]
        ]
        ratios[way] = {
            "of_medians": ratio(float(ways[way]["records_per_s"]["median"]), base),
            "paired": paired,
            "paired_median": statistics.median(paired) if paired else None,
        }
    return {"ways": ways, "ratios_to_confluent": ratios}


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput_ab")
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default="poll,consume", help="poll, consume or both")
    parser.add_argument("--prefetch", choices=tuple(PREFETCH), default="unbounded")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--name", default="throughput_ab", help="the result file's name")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in _IMPLS]
    if unknown or not shapes:
        parser.error(f"--shapes: {unknown or shapes} not allowed; choose from {list(_IMPLS)}")
    work = Workload(f"{args.record_bytes}B", args.count, args.record_bytes)
    started = time.time()
    load = list(os.getloadavg())
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    try:
        result = run(
            args.baseline_tree,
            brokers.fast(),
            work,
            shapes=shapes,
            prefetch=args.prefetch,
            repeat=args.repeat,
        )
    finally:
        brokers.close()
    payload = {
        "benchmark": "throughput_ab",
        "size": "full",
        "repeat": args.repeat,
        "command": "python -m benchmarks.throughput_ab " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": args.bootstrap is not None,
        "workload": {"count": work.count, "size": work.size, "prefetch": args.prefetch},
        "result": result,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, args.name, payload)}")
    for shape, entry in result["summaries"].items():
        for way, figures in entry["ways"].items():
            rate, thread = figures["records_per_s"], figures["thread_cpu_us_per_record"]
            print(
                f"{shape} {way}: median {rate['median']:,.0f} rec/s "
                f"({rate['min']:,.0f}-{rate['max']:,.0f}), thread CPU "
                f"{thread['median']:.3f} us/rec ({thread['min']:.3f}-{thread['max']:.3f}), "
                f"process {figures['process_cpu_us_per_record']['median']:.3f} us/rec"
            )
        for way, figures in entry["ratios_to_confluent"].items():
            paired = ", ".join(f"{r:.3f}" for r in figures["paired"])
            print(f"{shape} {way}/confluent: {figures['of_medians']:.3f} (paired: {paired})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
