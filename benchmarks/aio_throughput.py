"""Throughput of ``consumer.aio.AsyncConsumer`` next to the synchronous consumers, same run.

Records/s consumed to the end of the 12-partition throughput topics (the ``throughput``
benchmark's topics and method: a fresh group per run, ``auto.offset.reset=earliest``, the rate
measured from the first ``on_assign`` to the last record), interleaved and rotated each
repetition:

* ``confluent-848-poll`` / ``confluent-848-consume``: confluent-kafka's KIP-848 ``Consumer``
  (the reference column; full size only);
* ``ours-poll`` / ``ours-consume``: ``consumer.Consumer`` (``consume(num_messages=500)``);
* ``aio-poll``: ``await consumer.poll(1.0)`` per record on an ``AsyncConsumer``;
  ``aio-consume``: ``await consumer.consume(500, 1.0)``.

The figure of issue #16 is ``aio/ours``: the async consumer's median rate over the synchronous
one's with the same call shape (``aio-poll`` over ``ours-poll``, ``aio-consume`` over
``ours-consume``); the target is at least 0.9. The smoke size (the CI's harness check) runs only
the four ways of ours on 20,000 records of 100 B.

``python -m benchmarks aio_throughput [--size smoke|full] [--repeat N]`` writes
``benchmarks/results/aio_throughput.json`` and the report's section (:func:`section`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._throughput_proc import run_with_cpu
from benchmarks.common import log, ratio, summary
from benchmarks.stalls import POLL_MARK_EVERY, StallMarks, by_stalls, run_figures
from benchmarks.throughput import BATCH, PARTITIONS, Workload, ensure_topic, run_once, workloads
from benchmarks.throughput_report import stalls_table
from consumer.aio import AsyncConsumer

REFERENCE = ("confluent-848-poll", "confluent-848-consume")
OURS = ("ours-poll", "ours-consume")
AIO = ("aio-poll", "aio-consume")
IMPLEMENTATIONS = REFERENCE + OURS + AIO
#: ``aio/ours`` pairs: each async way over the synchronous one with the same call shape.
PAIRS = {"aio-poll": "ours-poll", "aio-consume": "ours-consume"}
#: Ways of one call shape, compared at the same number of fetch stalls (the first is the base).
SHAPES = {
    "poll": ("ours-poll", "aio-poll", "confluent-848-poll"),
    "consume": ("ours-consume", "aio-consume", "confluent-848-consume"),
}
#: The issue's target for every ``aio/ours`` ratio of medians.
TARGET = 0.9


def implementations(size: str) -> tuple[str, ...]:
    """The ways measured at ``size``: all six at full size, ours and aio at smoke size."""
    return IMPLEMENTATIONS if size == "full" else OURS + AIO


def aio_workloads(size: str) -> list[Workload]:
    """The throughput benchmark's workloads (smoke: its 100 B topic only, to keep CI short)."""
    found = workloads(size)
    return found if size == "full" else found[:1]


async def _aio_drain(
    impl: str, bootstrap: str, topic: str, total: int, marks: StallMarks
) -> dict[str, float]:
    """Consume ``total`` records with an AsyncConsumer, marking ``marks``; the times of each
    step."""
    assigned: list[float] = []

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        if partitions and not assigned:
            assigned.append(time.monotonic())

    start = time.monotonic()
    deadline = start + max(60.0, total / 2_000)
    count = 0
    async with AsyncConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-aio-{uuid.uuid4().hex[:10]}",
            "auto.offset.reset": "earliest",
        }
    ) as consumer:
        consumer.subscribe([topic], on_assign=on_assign)
        # The loops of benchmarks.throughput's _drain_poll / _drain_consume, with await.
        if impl == "aio-poll":
            poll = consumer.poll
            every = POLL_MARK_EVERY - 1
            while count < total:
                message = await poll(1.0)
                if message is None:
                    if time.monotonic() > deadline:
                        break
                    continue
                if message.error() is None:
                    if not count & every:
                        marks.mark()
                    count += 1
            if count >= total:
                marks.mark()  # a stall among the last records, after the last mark
        else:
            consume = consumer.consume
            while count < total:
                batch = await consume(BATCH, 1.0)
                if not batch:
                    if time.monotonic() > deadline:
                        break
                    continue
                good = sum(1 for message in batch if message.error() is None)
                if good:
                    marks.mark()
                count += good
        end = time.monotonic()
    return {
        "start": start,
        "assigned": assigned[0] if assigned else start,
        "end": end,
        "count": count,
    }


def aio_run_once(impl: str, bootstrap: str, topic: str, total: int, size: int) -> dict[str, Any]:
    """One run of an ``aio-*`` way, reported as :func:`benchmarks.throughput.run_once` does."""
    marks = StallMarks()
    times = asyncio.run(_aio_drain(impl, bootstrap, topic, total, marks))
    return run_figures(
        impl,
        count=int(times["count"]),
        total=total,
        size=size,
        start_s=times["start"],
        assigned_s=times["assigned"],
        end_s=times["end"],
        marks=marks,
    )


def _pair_ratios(runs: list[dict[str, Any]], aio: str, sync: str) -> list[float]:
    """``aio``'s rate over ``sync``'s, per repetition (the two ran next to each other)."""
    by_rep: dict[int, dict[str, float]] = {}
    for run in runs:
        by_rep.setdefault(run["repetition"], {})[run["impl"]] = run["records_per_s"]
    return [ratio(r[aio], r[sync]) for r in by_rep.values() if aio in r and sync in r]


def run(bootstrap: str, size: str, repeat: int) -> dict[str, Any]:
    """The whole benchmark; returns the JSON-ready result."""
    ways = implementations(size)
    results: dict[str, Any] = {
        "partitions": PARTITIONS,
        "batch": BATCH,
        "implementations": list(ways),
        "workloads": {},
    }
    for work in aio_workloads(size):
        topic = ensure_topic(bootstrap, work)
        runs: list[dict[str, Any]] = []
        for rep in range(repeat):
            shift = rep % len(ways)
            for impl in ways[shift:] + ways[:shift]:
                once = aio_run_once if impl in AIO else run_once
                outcome = run_with_cpu(once, impl, bootstrap, topic, work.count, work.size)
                outcome["repetition"] = rep
                runs.append(outcome)
                log(
                    f"aio throughput {work.label} {impl}: {outcome['records_per_s']:,.0f} rec/s "
                    f"({outcome['consumed']}/{work.count})"
                )

        def per_way(key: str, runs: list[dict[str, Any]] = runs) -> dict[str, Any]:
            return {impl: summary([r[key] for r in runs if r["impl"] == impl]) for impl in ways}

        stats, busy = per_way("records_per_s"), per_way("busy_records_per_s")
        cpu = {
            f"{impl}/{kind}": summary(
                [r[f"{kind}_cpu_us_per_record"] for r in runs if r["impl"] == impl]
            )
            for impl in ways
            for kind in ("process", "thread")
        }
        median = {impl: float(stats[impl]["median"]) for impl in ways}
        busy_median = {impl: float(busy[impl]["median"]) for impl in ways}
        results["workloads"][work.label] = {
            "topic": topic,
            "count": work.count,
            "size": work.size,
            "runs": runs,
            "stats": stats,
            "cpu_us_per_record": cpu,
            "ratios": {
                f"{aio}/{sync}": ratio(median[aio], median[sync]) for aio, sync in PAIRS.items()
            },
            "busy_stats": busy,
            "busy_ratios": {
                f"{aio}/{sync}": ratio(busy_median[aio], busy_median[sync])
                for aio, sync in PAIRS.items()
            },
            "stall_stats": per_way("stalls"),
            "by_stalls": by_stalls(runs, SHAPES),
            "pair_ratios": {
                f"{aio}/{sync}": summary(_pair_ratios(runs, aio, sync))
                for aio, sync in PAIRS.items()
            },
            "thread_cpu_ratios": {
                f"{aio}/{sync}": ratio(
                    cpu[f"{aio}/thread"]["median"], cpu[f"{sync}/thread"]["median"]
                )
                for aio, sync in PAIRS.items()
            },
        }
    return results


def headline(payload: dict[str, Any]) -> list[str]:
    """Rows of the report's headline table: ``aio/ours`` per workload and call shape, judged by
    the ratio of busy rates (fetch stalls left out; ``benchmarks.stalls``)."""
    rows: list[str] = []
    for label, work in payload["result"]["workloads"].items():
        for key, whole in work["ratios"].items():
            busy = (work.get("busy_ratios") or {}).get(key)
            value = whole if busy is None else busy
            cell = f"{value:.2f}" if busy is None else f"{busy:.2f} (whole-run medians {whole:.2f})"
            ok = value >= TARGET
            gap = "" if ok else f"; short by {TARGET - value:.2f}"
            rows.append(
                f"| AsyncConsumer throughput {label} {key} | ≥ {TARGET} | {cell}{gap} | "
                f"{'**met**' if ok else '**missed**'} |"
            )
    return rows


def section(payload: dict[str, Any], _out: Path) -> list[str]:
    """The report's section: medians, ranges and the ``aio/ours`` ratios."""
    result = payload["result"]
    ways = result["implementations"]
    lines = [
        "## AsyncConsumer throughput",
        "",
        "`consumer.aio.AsyncConsumer` against the synchronous `consumer.Consumer` and "
        "confluent-kafka's KIP-848 `Consumer`, in the same run on the throughput topics "
        "(method of section 1: fresh group per run, rate from the first `on_assign` to the last "
        "record). *poll*: one `poll(1.0)` (`await` for aio) per record; *consume*: "
        f"`consume({result['batch']}, 1.0)`. Ways interleaved, order rotated per repetition; "
        f"{payload['repeat']} repetition(s). Target: aio / ours ≥ {TARGET} for each call shape "
        "(ratio of medians; *per repetition* is the ratio of the two runs of one repetition). "
        "*CPU µs / record*: CPU time from the consumer's creation to its close over the records "
        "consumed, of the whole process (every thread) and of the polling thread (where `poll()` "
        "runs, and the event loop for aio); unlike records/s it hardly depends on what else the "
        "machine runs. *Stalls* and *busy records/s* as in section 1: gaps of more than 50 ms "
        "without a record (librdkafka's fetch backoff), and the rate over a run's time less its "
        "stalls; the target is judged by the ratio of busy rates.",
        "",
        "| workload | way | median records/s | min–max | vs confluent KIP-848 (same shape) | "
        "stalls per run: median (min–max) | busy records/s | CPU µs / record: process | "
        "polling thread |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, work in result["workloads"].items():
        stats = work["stats"]
        for impl in ways:
            shape = impl.rsplit("-", 1)[1]
            reference = stats.get(f"confluent-848-{shape}", {}).get("median", 0.0)
            versus = f"{stats[impl]['median'] / reference:.2f}" if reference else "–"
            cpu = work["cpu_us_per_record"]
            stalls = (work.get("stall_stats") or {}).get(impl)
            busy = (work.get("busy_stats") or {}).get(impl)
            lines.append(
                f"| {work['count']:,} × {label} | {impl} | {stats[impl]['median']:,.0f} | "
                f"{stats[impl]['min']:,.0f}–{stats[impl]['max']:,.0f} | {versus} | "
                + (
                    f"{stalls['median']:.0f} ({stalls['min']:.0f}–{stalls['max']:.0f}) | "
                    f"{busy['median']:,.0f} | "
                    if stalls and busy
                    else "n/a | n/a | "
                )
                + f"{cpu[f'{impl}/process']['median']:.1f} | "
                f"{cpu[f'{impl}/thread']['median']:.1f} |"
            )
    lines += [
        "",
        "| workload | aio / ours | busy records/s: ratio of medians | records/s: ratio of "
        "medians | per repetition: median (min–max) | polling-thread CPU per record: aio / ours |",
        "|---|---|---|---|---|---|",
    ]
    for label, work in result["workloads"].items():
        for key, value in work["ratios"].items():
            pairs = work["pair_ratios"][key]
            busy = (work.get("busy_ratios") or {}).get(key)
            lines.append(
                f"| {label} | {key} | **{'n/a' if busy is None else f'{busy:.2f}'}** | "
                f"{value:.2f} | {pairs['median']:.2f} "
                f"({pairs['min']:.2f}–{pairs['max']:.2f}) | "
                f"{work['thread_cpu_ratios'][key]:.2f} |"
            )
    lines.append("")
    for label, work in result["workloads"].items():
        table = stalls_table(work.get("by_stalls") or {}, SHAPES, {})
        if table:
            lines += [f"{work['count']:,} × {label}:", "", *table]
    return lines
