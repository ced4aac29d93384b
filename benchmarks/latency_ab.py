"""Ack and delivery latency: this tree against a baseline tree, alternating.

``python -m benchmarks.latency_ab --baseline-tree DIR [--bootstrap HOST:PORT] [--repeat 2]``
runs, per repetition and tree (the order alternates), one ``ack_latency.run_case`` (1 member,
8 partitions growing by 4 in 20 steps: ``[total_ms, sdk_ms]`` per new assignment) and one
``delivery_latency.run_case`` (20 records to an idle member), each in a fresh child process
whose ``PYTHONPATH`` is that tree, plus confluent-kafka's delivery latency once per repetition.
Prints every sample's summary and writes ``benchmarks/results/latency_ab.json`` with every
sample. For a change to the library's waits this is the check that reaction did not slow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    REPO_ROOT,
    log,
    machine_facts,
    percentile,
    write_result,
)

_ACK = (
    "import json, sys; from benchmarks import ack_latency as a; "
    "print(json.dumps([list(s) for s in a.run_case(sys.argv[1], 1, 8, 20, 4)]))"
)
_DELIVERY = (
    "import json, sys, random; from benchmarks import delivery_latency as d; "
    "print(json.dumps(d.run_case(sys.argv[1], sys.argv[2], 20, random.Random())))"
)


def _child(root: Path, code: str, *args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"latency child failed in {root}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(baseline: Path, bootstrap: str, repeat: int) -> dict[str, Any]:
    """Every sample, by measure and variant, plus p50/p99/max summaries."""
    trees = {"ours": REPO_ROOT, "baseline": baseline}
    samples: dict[str, list[Any]] = {}
    for rep in range(repeat):
        order = ["ours", "baseline"] if rep % 2 == 0 else ["baseline", "ours"]
        for name in order:
            samples.setdefault(f"ack/{name}", []).extend(_child(trees[name], _ACK, bootstrap))
            delivery = _child(trees[name], _DELIVERY, bootstrap, "ours")
            samples.setdefault(f"delivery/{name}", []).extend(delivery)
        confluent = _child(REPO_ROOT, _DELIVERY, bootstrap, "confluent-848")
        samples.setdefault("delivery/confluent-848", []).extend(confluent)
        log(f"latency A/B repetition {rep} done (load {os.getloadavg()[0]:.1f})")
    summaries: dict[str, dict[str, float]] = {}
    for key, values in samples.items():
        flat = [v[0] for v in values] if key.startswith("ack/") else list(values)
        summaries[key] = _summary(flat)
        if key.startswith("ack/"):
            summaries[key.replace("ack/", "ack-sdk/")] = _summary([v[1] for v in values])
    return {"samples": samples, "summaries": summaries}


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": percentile(values, 0.5),
        "p99_ms": percentile(values, 0.99),
        "max_ms": max(values, default=0.0),
    }


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency_ab")
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    if args.bootstrap is None:
        parser.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    started = time.time()
    load = list(os.getloadavg())
    result = run(args.baseline_tree, args.bootstrap, args.repeat)
    payload = {
        "benchmark": "latency_ab",
        "size": "full",
        "repeat": args.repeat,
        "command": "python -m benchmarks.latency_ab " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": True,
        "result": result,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, 'latency_ab', payload)}")
    for key, stats in sorted(result["summaries"].items()):
        print(
            f"{key}: n={stats['n']} p50 {stats['p50_ms']:.1f} ms, p99 {stats['p99_ms']:.1f} ms, "
            f"max {stats['max_ms']:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
