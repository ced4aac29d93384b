"""Why the default-prefetch throughput rows are bimodal: librdkafka's fetch queue backoff.

``python -m benchmarks.fetch_stalls [--bootstrap HOST:PORT] [--repeat 6] [--backoffs 1000,100]
[--name fetch_stalls]`` consumes the throughput benchmark's 1,000,000 × 100 B topic with
``consume(500)`` from the assignment to the last record, with librdkafka's default prefetch and
``fetch.queue.backoff.ms`` at each value of ``--backoffs`` (1000 is librdkafka's default), for
confluent-kafka's KIP-848 consumer and ours, alternating. Each run records its rate and every
*stall*: a gap of more than 50 ms between two batches. When the local queue is over its
thresholds librdkafka postpones a partition's next fetch by ``fetch.queue.backoff.ms``, even when
the application empties the queue sooner; a run then spans a whole number of such stalls, and
its rate falls into one of a few discrete modes. With a short backoff the stalls shrink with it
and the modes go. Writes ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from benchmarks.common import DEFAULT_RESULTS_DIR, BrokerSet, log, machine_facts, write_result
from benchmarks.stalls import STALL_S
from benchmarks.throughput import Workload, _make, ensure_topic

IMPLS = ("confluent-848-consume", "ours-consume")


def run_once(impl: str, bootstrap: str, topic: str, total: int, backoff_ms: int) -> dict[str, Any]:
    """Consume ``total`` records; the rate from the assignment and the stalls on the way."""
    assigned: list[float] = []
    consumer = _make(impl, bootstrap, topic, assigned, {"fetch.queue.backoff.ms": backoff_ms})
    count, batch_times = 0, []
    deadline = time.monotonic() + max(60.0, total / 2_000)
    try:
        while count < total and time.monotonic() < deadline:
            batch = consumer.consume(500, 1.0)
            good = sum(1 for message in batch if message.error() is None)
            if good:
                batch_times.append(time.monotonic())
                count += good
    finally:
        consumer.close()
    begin = assigned[0] if assigned else batch_times[0]
    took_s = batch_times[-1] - begin
    stalls = [
        round(later - earlier, 3)
        for earlier, later in zip(batch_times, batch_times[1:], strict=False)
        if later - earlier > STALL_S
    ]
    return {
        "impl": impl,
        "backoff_ms": backoff_ms,
        "consumed": count,
        "records_per_s": count / took_s,
        "seconds": took_s,
        "stalls_s": stalls,
        "load": os.getloadavg()[0],
    }


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fetch_stalls")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--backoffs", default="1000,100", help="fetch.queue.backoff.ms values")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--name", default="fetch_stalls", help="the result file's name")
    args = parser.parse_args()
    try:
        backoffs = [int(value) for value in args.backoffs.split(",") if value]
    except ValueError:
        parser.error(f"--backoffs: {args.backoffs!r} must be integers (milliseconds)")
    if not backoffs or min(backoffs) < 0:
        parser.error(f"--backoffs: {args.backoffs!r} must be integers >= 0 (milliseconds)")
    work = Workload("100B", args.count, 100)
    started = time.time()
    load = list(os.getloadavg())
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    runs: list[dict[str, Any]] = []
    try:
        bootstrap = brokers.fast()
        topic = ensure_topic(bootstrap, work)
        for rep in range(args.repeat):
            for backoff_ms in backoffs:
                order = IMPLS if rep % 2 == 0 else tuple(reversed(IMPLS))
                for impl in order:
                    run = run_once(impl, bootstrap, topic, work.count, backoff_ms)
                    runs.append({"rep": rep, **run})
                    log(
                        f"{impl} backoff {backoff_ms} ms rep {rep}: "
                        f"{run['records_per_s']:,.0f} rec/s, stalls {run['stalls_s']}"
                    )
    finally:
        brokers.close()
    summaries = {}
    for backoff_ms in backoffs:
        for impl in IMPLS:
            mine = [r for r in runs if r["impl"] == impl and r["backoff_ms"] == backoff_ms]
            rates = [r["records_per_s"] for r in mine]
            summaries[f"{impl} backoff {backoff_ms} ms"] = {
                "median_records_per_s": statistics.median(rates),
                "min_records_per_s": min(rates),
                "max_records_per_s": max(rates),
                "stalls_per_run": [len(r["stalls_s"]) for r in mine],
                "median_stall_s": statistics.median(
                    [s for r in mine for s in r["stalls_s"]] or [0.0]
                ),
            }
    payload = {
        "benchmark": "fetch_stalls",
        "size": "full",
        "repeat": args.repeat,
        "command": "python -m benchmarks.fetch_stalls " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "workload": {"count": work.count, "size": work.size, "prefetch": "default"},
        "runs": runs,
        "summaries": summaries,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, args.name, payload)}")
    for key, figures in summaries.items():
        print(
            f"{key}: median {figures['median_records_per_s']:,.0f} rec/s "
            f"({figures['min_records_per_s']:,.0f}-{figures['max_records_per_s']:,.0f}), "
            f"stalls per run {figures['stalls_per_run']}, "
            f"median stall {figures['median_stall_s']} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
