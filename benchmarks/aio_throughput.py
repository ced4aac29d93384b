"""Throughput of ``consumer.aio.AsyncConsumer`` next to the synchronous consumers, same run.

Records/s consumed to the end of the 12-partition throughput topic (the ``throughput``
benchmark's topics and method: a fresh group, ``auto.offset.reset=earliest``, the rate measured
from the first ``on_assign`` to the last record), six ways, interleaved and rotated each
repetition:

* ``confluent-848-poll`` / ``confluent-848-consume``: confluent-kafka's KIP-848 member;
* ``ours-poll`` / ``ours-consume``: ``consumer.Consumer`` (``consume(num_messages=500)``);
* ``aio-poll``: ``async for message in consumer`` on an ``AsyncConsumer`` (each record is one
  ``await poll()``); ``aio-consume``: ``await consumer.consume(500, 1.0)``.

The figure of issue #16 is ``aio/ours``: the async consumer's median rate over the synchronous
one's with the same call shape (``aio-poll`` over ``ours-poll``, ``aio-consume`` over
``ours-consume``); it should be at least 0.9.

``python -m benchmarks.aio_throughput [--size smoke|full] [--repeat N] [--bootstrap HOST:PORT]``
prints the table and writes ``benchmarks/results/aio/aio_throughput.json`` (a folder of its own:
``benchmarks/report.py`` reads every ``benchmarks/results/*.json`` as a ``python -m benchmarks``
result). ``run(bootstrap, size, repeat)`` has the signature of the other benchmarks' ``run``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    BrokerSet,
    log,
    machine_facts,
    ratio,
    summary,
    write_result,
)
from benchmarks.throughput import BATCH, PARTITIONS, ensure_topic, run_once, workloads
from consumer.aio import AsyncConsumer

SYNC_IMPLEMENTATIONS = ("confluent-848-poll", "confluent-848-consume", "ours-poll", "ours-consume")
AIO_IMPLEMENTATIONS = ("aio-poll", "aio-consume")
IMPLEMENTATIONS = SYNC_IMPLEMENTATIONS + AIO_IMPLEMENTATIONS
#: ``aio/ours`` pairs: each async way over the synchronous one with the same call shape.
PAIRS = {"aio-poll": "ours-poll", "aio-consume": "ours-consume"}


async def _aio_drain(impl: str, bootstrap: str, topic: str, total: int) -> dict[str, float]:
    """Consume ``total`` records with an AsyncConsumer; the times of each step."""
    assigned: list[float] = []

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        if partitions and not assigned:
            assigned.append(time.monotonic())

    start = time.monotonic()
    deadline = start + max(60.0, total / 2_000)
    count, first = 0, None
    async with AsyncConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-aio-{uuid.uuid4().hex[:10]}",
            "auto.offset.reset": "earliest",
        }
    ) as consumer:
        consumer.subscribe([topic], on_assign=on_assign)
        if impl == "aio-poll":
            while count < total and time.monotonic() < deadline:
                message = await consumer.poll(1.0)
                if message is not None and message.error() is None:
                    first = first or time.monotonic()
                    count += 1
        else:
            while count < total and time.monotonic() < deadline:
                batch = await consumer.consume(BATCH, 1.0)
                good = sum(1 for message in batch if message.error() is None)
                if good and first is None:
                    first = time.monotonic()
                count += good
        end = time.monotonic()
    return {
        "start": start,
        "assigned": assigned[0] if assigned else start,
        "first": first or 0.0,
        "end": end,
        "count": count,
    }


def aio_run_once(impl: str, bootstrap: str, topic: str, total: int, size: int) -> dict[str, Any]:
    """One run of an ``aio-*`` way, reported as :func:`benchmarks.throughput.run_once` does."""
    times = asyncio.run(_aio_drain(impl, bootstrap, topic, total))
    count, begin, first, end = (
        int(times["count"]),
        times["assigned"],
        times["first"],
        times["end"],
    )
    rate = ratio(count, end - begin)
    return {
        "impl": impl,
        "consumed": count,
        "expected": total,
        "records_per_s": rate,
        "steady_records_per_s": ratio(max(count - 1, 0), end - first) if first else 0.0,
        "mb_per_s": rate * size / 1e6,
        "assigned_s": begin - times["start"],
        "first_record_s": (first - times["start"]) if first else None,
        "total_s": end - times["start"],
    }


def run(bootstrap: str, size: str, repeat: int) -> dict[str, Any]:
    """The whole benchmark; returns the JSON-ready result."""
    results: dict[str, Any] = {"partitions": PARTITIONS, "batch": BATCH, "workloads": {}}
    for work in workloads(size):
        topic = ensure_topic(bootstrap, work)
        runs: list[dict[str, Any]] = []
        for rep in range(repeat):
            shift = rep % len(IMPLEMENTATIONS)
            for impl in IMPLEMENTATIONS[shift:] + IMPLEMENTATIONS[:shift]:
                once = aio_run_once if impl in AIO_IMPLEMENTATIONS else run_once
                outcome = once(impl, bootstrap, topic, work.count, work.size)
                outcome["repetition"] = rep
                runs.append(outcome)
                log(
                    f"aio throughput {work.label} {impl}: {outcome['records_per_s']:,.0f} rec/s "
                    f"({outcome['consumed']}/{work.count})"
                )
        stats = {
            impl: summary([r["records_per_s"] for r in runs if r["impl"] == impl])
            for impl in IMPLEMENTATIONS
        }
        median = {impl: float(stats[impl]["median"]) for impl in IMPLEMENTATIONS}
        results["workloads"][work.label] = {
            "topic": topic,
            "count": work.count,
            "size": work.size,
            "runs": runs,
            "stats": stats,
            "ratios": {
                f"{aio}/{sync}": ratio(median[aio], median[sync]) for aio, sync in PAIRS.items()
            },
        }
    return results


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the medians and the ``aio/ours`` ratios."""
    lines = [
        "| workload | " + " | ".join(IMPLEMENTATIONS) + " | aio/ours (poll) | aio/ours (consume) |",
        "|---" * (len(IMPLEMENTATIONS) + 3) + "|",
    ]
    for label, work in result["workloads"].items():
        rates = [f"{work['stats'][impl]['median']:,.0f}" for impl in IMPLEMENTATIONS]
        ratios = [f"{work['ratios'][f'{aio}/{sync}']:.2f}" for aio, sync in PAIRS.items()]
        lines.append(f"| {label} | " + " | ".join(rates + ratios) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.aio_throughput")
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = parser.parse_args(argv)
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    try:
        result = run(brokers.fast(), args.size, args.repeat)
    finally:
        brokers.close()
    result["machine"] = machine_facts()
    path = write_result(DEFAULT_RESULTS_DIR / "aio", "aio_throughput", result)
    print(render(result))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
