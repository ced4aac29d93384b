"""Idle CPU per member: this tree against a baseline tree and confluent-kafka, interleaved.

``python -m benchmarks.idle_ab --baseline-tree DIR [--bootstrap HOST:PORT] [--slow-bootstrap
HOST:PORT] [--label NAME] [--members 1,10,50] [--repeat 2] [--window 15] [--result-name NAME]``
runs ``benchmarks._cost_proc`` (N idle members in a fresh child process, CPU over a window after
they settled) for three implementations in turn, per member count and repetition, on the same
broker (``--label`` names it in the results, default ``hb-500ms``):

* ``ours``: this tree;
* ``baseline``: the same program from ``DIR`` (e.g. ``git archive <rev> | tar -x -C DIR``);
* ``confluent-848``: confluent-kafka's KIP-848 consumer.

With ``--slow-bootstrap`` (a broker with 5 s heartbeats, as ``python -m benchmarks`` starts for
its ``hb-5s`` rows) the same is done there. Prints one line per child and a summary, and writes
``benchmarks/results/<NAME>.json`` (default ``idle_ab``). The three alternate, so the machine's
load affects them alike; the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    REPO_ROOT,
    create_topic,
    log,
    machine_facts,
    write_result,
)


def measure(root: Path, bootstrap: str, impl: str, members: int, window_s: float) -> float:
    """CPU (% of one core) per member of ``members`` idle members, program from ``root``."""
    topic = f"bench-idle-{members}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, members)
    spec = {
        "impl": impl,
        "members": members,
        "bootstrap": bootstrap,
        "topic": topic,
        "warmup_s": 3.0,
        "window_s": window_s,
    }
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks._cost_proc", json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=300 + members * 5,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"cost child failed ({impl}, {members}):\n{out.stderr[-2000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    return float(row["cpu_pct"]) / members


def run(
    baseline: Path,
    brokers: list[tuple[str, str]],
    counts: list[int],
    repeat: int,
    window_s: float,
) -> dict[str, Any]:
    """Every (broker, count, repetition), the three implementations in rotating order."""
    variants = [("ours", REPO_ROOT, "ours"), ("baseline", baseline, "ours")]
    variants.append(("confluent-848", REPO_ROOT, "confluent-848"))
    rows: list[dict[str, Any]] = []
    for broker_name, bootstrap in brokers:
        for rep in range(repeat):
            for members in counts:
                shift = (rep + members) % len(variants)
                for name, root, impl in variants[shift:] + variants[:shift]:
                    try:
                        cpu = measure(root, bootstrap, impl, members, window_s)
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:  # e.g. no settle
                        log(f"idle {broker_name} {name} N={members}: failed, skipped: {exc!s:.200}")
                        continue
                    load = os.getloadavg()[0]
                    rows.append(
                        {
                            "broker": broker_name,
                            "variant": name,
                            "members": members,
                            "repetition": rep,
                            "cpu_pct_per_member": cpu,
                            "load1": load,
                        }
                    )
                    log(f"idle {broker_name} {name} N={members}: {cpu:.3f} % (load {load:.1f})")
    stats: dict[str, Any] = {}
    for row in rows:
        key = f"{row['broker']}/{row['members']}/{row['variant']}"
        stats.setdefault(key, []).append(row["cpu_pct_per_member"])
    return {
        "rows": rows,
        "medians": {key: statistics.median(values) for key, values in stats.items()},
        "values": stats,
    }


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.idle_ab")
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--label", default="hb-500ms", help="what --bootstrap's broker is")
    parser.add_argument("--slow-bootstrap", default=None)
    parser.add_argument("--members", default="1,10,50")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--result-name", default="idle_ab", help="results/<name>.json")
    args = parser.parse_args()
    if args.bootstrap is None:
        parser.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    brokers = [(args.label, args.bootstrap)]
    if args.slow_bootstrap:
        brokers.append(("hb-5s", args.slow_bootstrap))
    counts = [int(n) for n in args.members.split(",")]
    started = time.time()
    load = list(os.getloadavg())
    result = run(args.baseline_tree, brokers, counts, args.repeat, args.window)
    payload = {
        "benchmark": "idle_ab",
        "size": "full",
        "repeat": args.repeat,
        "command": "python -m benchmarks.idle_ab " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": True,
        "result": result,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, args.result_name, payload)}")
    for key, value in sorted(result["medians"].items()):
        print(f"{key}: {value:.3f} % per member")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
