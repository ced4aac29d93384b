"""``python -m benchmarks.cluster_churn [--size full|moderate] [--impl ours|confluent|both]``: churn
on a local three-broker cluster, and the confluent-kafka anchor.

Runs ``tests/cluster/test_cluster_churn.py`` at the chosen size (full: 200,000 numbered records
produced with ``acks=all`` and idempotence, 52 faults of which 22 hit brokers; moderate: 40,000
records, 20 faults of which 10 on brokers). The broker faults: the coordinator's broker killed, a
broker killed or shut down and restarted, a broker paused past its session; the rest hit member
processes. The checks are the CI size's: nothing lost, no partition owned twice at once, no
commit going back, every duplicate explained, no member FATAL.

``--impl`` chooses the members: our KIP-848 ``Consumer`` (``ours``), confluent-kafka's KIP-848
consumer (``confluent``), or one run of each on the same seed (``both``). Each run writes its
figures (the invariant counts and the recovery times after each fault) to
``benchmarks/results/cluster/cluster_churn-<size>-<impl>.json`` (the full size of ours keeps
the historical name ``cluster_churn.json``); ``both`` also writes
``cluster_churn_anchor-<size>.json``: the median and max recovery after broker faults and after
member faults of each, against two heartbeat intervals. confluent's members report no member
state, so their recovery ends when every partition is owned once and the assignment balanced;
ours must also have every member STABLE (a stricter rule, so the comparison does not favour us).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results" / "cluster"
BROKER_KINDS = ("coordinator_kill", "broker_kill", "broker_pause", "broker_stop")
TWO_HEARTBEATS_S = 1.0


def result_path(size: str, impl: str) -> Path:
    if size == "full" and impl == "ours":
        return RESULTS / "cluster_churn.json"
    return RESULTS / f"cluster_churn-{size}-{impl}.json"


def run_one(size: str, impl: str, seed: int, out: Path) -> int:
    """One churn run; returns pytest's exit code (the figures are written even if it failed)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "KGM_CLUSTER_CHURN_SIZE": size,
        "KGM_CLUSTER_CHURN_IMPL": impl,
        "KGM_RELIABILITY_SEED": str(seed),
        "KGM_CLUSTER_CHURN_RESULT": str(out),
    }
    out.unlink(missing_ok=True)  # a run that fails before its figures must not stamp old ones
    started = time.monotonic()
    test = "tests/cluster/test_cluster_churn.py"
    code = subprocess.call(
        [sys.executable, "-m", "pytest", test, "-q", "-s", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        env=env,
    )
    if out.exists():
        figures = json.loads(out.read_text())
        figures.update(
            seed=seed,
            passed=code == 0,
            wall_s=round(time.monotonic() - started),
            loadavg=os.getloadavg(),
        )
        out.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"cluster churn figures ({impl}) in {out}")  # noqa: T201 - the command's output
    return code


def _median_max(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0}
    return {
        "count": len(ordered),
        "median_s": round(ordered[len(ordered) // 2], 2),
        "max_s": round(ordered[-1], 2),
        "within_two_heartbeats": sum(v <= TWO_HEARTBEATS_S for v in ordered),
    }


def anchor(figures_by_impl: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Recovery after broker faults and after member faults, by implementation."""
    table: dict[str, Any] = {"two_heartbeats_s": TWO_HEARTBEATS_S}
    for impl, figures in figures_by_impl.items():
        times: dict[str, list[float]] = figures.get("to_stable_s", {})
        broker = [t for k, v in times.items() if k in BROKER_KINDS for t in v]
        member = [t for k, v in times.items() if k not in BROKER_KINDS for t in v]
        table[impl] = {
            "after_broker_faults": _median_max(broker),
            "after_member_faults": _median_max(member),
            "by_kind_max_s": {k: round(max(v), 2) for k, v in times.items() if v},
            "lost": figures.get("lost"),
            "double_owned": figures.get("double_owned"),
            "commit_regressions": figures.get("commit_regressions"),
            "duplicates": figures.get("duplicates"),
            "passed": figures.get("passed"),
        }
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """Run the churn for the chosen members; return the worst pytest exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_churn", description=__doc__)
    parser.add_argument("--seed", type=int, default=848, help="fault schedule seed (default 848)")
    parser.add_argument("--size", choices=("full", "moderate"), default="full")
    parser.add_argument("--impl", choices=("ours", "confluent", "both"), default="ours")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    impls = ("ours", "confluent") if args.impl == "both" else (args.impl,)
    codes = [run_one(args.size, impl, args.seed, result_path(args.size, impl)) for impl in impls]
    if args.impl == "both":
        figures = {
            impl: json.loads(result_path(args.size, impl).read_text())
            for impl in impls
            if result_path(args.size, impl).exists()
        }
        out = RESULTS / f"cluster_churn_anchor-{args.size}.json"
        out.write_text(json.dumps(anchor(figures), indent=2) + "\n")
        print(out.read_text())  # noqa: T201 - the command's output
    return max(codes)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
