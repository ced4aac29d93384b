"""``python -m benchmarks.cluster_churn [--seed N] [--out PATH]``: the full-size churn on a local
three-broker cluster.

Runs ``tests/cluster/test_cluster_churn.py`` at its full size (200,000 numbered records produced
with ``acks=all`` and idempotence, 52 faults of which 22 hit brokers: the coordinator's broker
killed, a broker killed or shut down and restarted, a broker paused past its session; the rest
hit member processes of our KIP-848 ``Consumer``), with the same checks as the CI size: nothing
lost, no partition owned twice at once, no commit going back, every duplicate explained, no member
FATAL. Writes the run's figures (the invariant counts and the recovery times after each fault,
against two heartbeat intervals) to ``benchmarks/results/cluster/cluster_churn.json`` and prints
them. Took 9 minutes on a loaded two-core machine.
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

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "cluster" / "cluster_churn.json"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the full-size cluster churn; return pytest's exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_churn", description=__doc__)
    parser.add_argument("--seed", type=int, default=848, help="fault schedule seed (default 848)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the figures go")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "KGM_CLUSTER_CHURN_SIZE": "full",
        "KGM_RELIABILITY_SEED": str(args.seed),
        "KGM_CLUSTER_CHURN_RESULT": str(args.out),
    }
    started = time.monotonic()
    test = "tests/cluster/test_cluster_churn.py"
    code = subprocess.call(
        [sys.executable, "-m", "pytest", test, "-q", "-s", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        env=env,
    )
    took_s = time.monotonic() - started
    if code == 0 and args.out.exists():
        figures = json.loads(args.out.read_text())
        figures.update(seed=args.seed, wall_s=round(took_s), loadavg=os.getloadavg())
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"cluster churn figures in {args.out}")  # noqa: T201 - the command's output
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
