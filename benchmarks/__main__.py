"""``python -m benchmarks [NAME ...] [--size smoke|full] [--repeat N]``.

Starts the local broker(s) (or reuses ``KAFKA_BOOTSTRAP_SERVERS`` / ``--bootstrap`` for the fast
one), runs the named benchmarks (all by default), writes ``benchmarks/results/<name>.json`` and
regenerates ``docs/benchmarks.md`` and ``docs/benchmarks/*.png`` from every result file present.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import BENCHMARKS
from benchmarks.common import (
    DEFAULT_DOCS_DIR,
    DEFAULT_RESULTS_DIR,
    BrokerSet,
    log,
    machine_facts,
    write_result,
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(BENCHMARKS)}")
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per case (default 3; 1 smoke)"
    )
    parser.add_argument(
        "--default-timer-repeat",
        type=int,
        default=None,
        help="repetitions on the 5 s heartbeat broker (convergence; default: --repeat)",
    )
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--no-profile", action="store_true", help="skip the pyinstrument runs")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    if args.repeat is None:
        args.repeat = 3 if args.size == "full" else 1
    return args


def run_one(name: str, brokers: BrokerSet, args: argparse.Namespace) -> dict[str, Any]:
    """Run benchmark ``name``; returns its JSON-ready result."""
    from benchmarks import ack_latency, convergence, member_cost, throughput

    size, repeat = args.size, args.repeat
    if name == "throughput":
        return throughput.run(brokers.fast(), size, repeat, profile=not args.no_profile)
    if name == "convergence":
        profiles = [(convergence.fast_profile(brokers.fast()), repeat)]
        if size == "full":
            slow_repeat = args.default_timer_repeat or repeat
            profiles.append((convergence.default_profile(brokers.default_timers()), slow_repeat))
        return convergence.run(profiles, size)
    if name == "ack_latency":
        return ack_latency.run(brokers.fast(), size, repeat)
    if name == "delivery_latency":
        from benchmarks import delivery_latency

        return delivery_latency.run(brokers.fast(), size, repeat)
    if name == "member_cost":
        targets = [("hb-500ms", brokers.fast(), 500)]
        if size == "full":
            targets.append(("hb-5s", brokers.default_timers(), 5000))
        return member_cost.run(targets, size, 1)
    if name == "share":
        from benchmarks import share_member_cost, share_throughput

        return {
            "throughput": share_throughput.run(brokers.fast(), size, repeat),
            "idle_cost": share_member_cost.run(brokers.fast(), size, 2 if size == "full" else 1),
        }
    if name == "aio_throughput":
        from benchmarks import aio_throughput

        return aio_throughput.run(brokers.fast(), size, repeat)

    if name == "scaling":
        from benchmarks import scaling

        return scaling.run(brokers, size, f"python -m benchmarks scaling --size {size}")
    raise ValueError(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    names = args.names or list(BENCHMARKS)
    command = "python -m benchmarks " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    try:
        for name in names:
            log(f"running {name} ({args.size}, repeat {args.repeat})")
            started = time.time()
            load_before = list(os.getloadavg())
            result = run_one(name, brokers, args)
            payload = {
                "benchmark": name,
                "size": args.size,
                "repeat": 1 if name == "member_cost" else args.repeat,
                "command": command,
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                "duration_s": time.time() - started,
                "loadavg_before": load_before,
                "loadavg_after": list(os.getloadavg()),
                "machine": machine_facts(),
                "external_broker": args.bootstrap is not None,
                "result": result,
            }
            path = write_result(args.results_dir, name, payload)
            log(f"wrote {path}")
    finally:
        brokers.close()
    from benchmarks.report import write_report

    doc = write_report(args.results_dir, args.docs_dir)
    log(f"wrote {doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
