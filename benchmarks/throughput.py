"""Throughput: records/s consumed to the end of a 12-partition topic, five ways.

(a) ``confluent-assign``: raw ``confluent_kafka.Consumer`` in assign mode, ``poll()``;
(b) ``confluent-848-poll``: confluent-kafka's KIP-848 member (``group.protocol=consumer``),
    ``poll()``;
(b') ``confluent-848-consume``: the same with ``consume(num_messages=500)``;
(c) ``ours-poll``: ``consumer.Consumer`` with ``poll()``;
(d) ``ours-consume``: ``consumer.Consumer`` with ``consume(num_messages=500)``.

Each run uses a fresh group id and ``auto.offset.reset=earliest``. The rate is measured from the
moment the partitions are assigned (the first ``on_assign`` callback; right after ``assign()``
for (a)) to the last record, so the group join is excluded but every fetch is included
(librdkafka prefetches as soon as partitions are assigned, so timing from the first record would
hide the fetch time of whatever was prefetched before it). The join is reported separately as
``assigned_s``. Implementations are interleaved, and the order rotates each repetition.

Every way runs under each librdkafka prefetch setting of :data:`PREFETCH`, interleaved too. With
librdkafka's defaults the local queue passes ``queued.min.messages`` (100,000 records: one or two
fetch responses of 100 B records) or ``queued.max.messages.kbytes`` (64 MiB: a third of the 1 KiB
topic) and every partition then waits ``fetch.queue.backoff.ms`` (1 s) before its next fetch, so a
run's length is mostly a whole number of those pauses and says little about the client
(benchmarks/analysis.md, session 11). ``unbounded`` raises both limits to librdkafka's maxima for
both clients: nothing pauses the fetcher, and the clients' own costs decide. Each run also records
its CPU per record (:func:`benchmarks._throughput_proc.run_with_cpu`), which hardly depends on the
pauses or on other load, and its fetch stalls (:mod:`benchmarks.stalls`): with the default
prefetch the runs of each way are also compared at the same number of stalls, and by their busy
rate (records over the run's time less its stalls), instead of only as medians over a mixture of
stall counts.
"""

from __future__ import annotations

import functools
import io
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka import Consumer as ConfluentConsumer

from benchmarks._throughput_proc import run_with_cpu
from benchmarks.common import (
    create_topic,
    end_offsets,
    log,
    produce,
    ratio,
    summary,
    topic_partitions,
)
from benchmarks.stalls import POLL_MARK_EVERY, STALL_S, StallMarks, by_stalls, run_figures
from consumer import Consumer as OurConsumer

PARTITIONS = 12
BATCH = 500
IMPLEMENTATIONS = (
    "confluent-assign",
    "confluent-848-poll",
    "confluent-848-consume",
    "ours-poll",
    "ours-consume",
)
LABELS = {
    "confluent-assign": "(a) confluent assign + poll()",
    "confluent-848-poll": "(b) confluent KIP-848 subscribe + poll()",
    "confluent-848-consume": "(b') confluent KIP-848 subscribe + consume(500)",
    "ours-poll": "(c) ours + poll()",
    "ours-consume": "(d) ours + consume(500)",
}
#: librdkafka prefetch settings, given to both clients: ``default`` (librdkafka's own: 100,000
#: records or 64 MiB queued, then a 1 s fetch backoff) and ``unbounded`` (both limits at
#: librdkafka's maxima, so that the fetcher never pauses for the application).
PREFETCH: dict[str, dict[str, Any]] = {
    "default": {},
    "unbounded": {"queued.min.messages": 10_000_000, "queued.max.messages.kbytes": 2_097_151},
}
#: Ways of one call shape, compared at the same number of fetch stalls; the first of each is the
#: ratio's base.
SHAPES = {
    "poll": ("confluent-848-poll", "ours-poll", "confluent-assign"),
    "consume": ("confluent-848-consume", "ours-consume"),
}


@dataclass(frozen=True)
class Workload:
    """One record size: ``count`` records of ``size`` bytes."""

    label: str
    count: int
    size: int

    @property
    def topic(self) -> str:
        return f"bench-throughput-{self.label}-{self.count}-p{PARTITIONS}"


def workloads(size: str) -> list[Workload]:
    """The record sizes of ``size`` (smoke or full)."""
    if size == "full":
        return [Workload("100B", 1_000_000, 100), Workload("1KiB", 200_000, 1024)]
    return [Workload("100B", 20_000, 100), Workload("1KiB", 5_000, 1024)]


def ensure_topic(bootstrap: str, work: Workload) -> str:
    """Create and fill the workload's topic once; reuse it when it already holds the records."""
    topic = work.topic
    partitions = topic_partitions(bootstrap, topic)
    if partitions == PARTITIONS and sum(end_offsets(bootstrap, topic, PARTITIONS).values()) == (
        work.count
    ):
        return topic
    if partitions is not None:  # wrong shape (an interrupted earlier run): use a new name
        topic = f"{topic}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    seconds = produce(bootstrap, topic, work.count, work.size, PARTITIONS)
    log(f"produced {work.count} x {work.size} B to {topic} in {seconds:.1f} s")
    return topic


def _base_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-tput-{uuid.uuid4().hex[:10]}",
        "auto.offset.reset": "earliest",
    }


def _make(
    impl: str, bootstrap: str, topic: str, assigned: list[float], overrides: Mapping[str, Any]
) -> Any:
    """The consumer; ``assigned`` receives the time its partitions were assigned."""
    config = {**_base_config(bootstrap), **overrides}
    if impl == "confluent-assign":
        config["enable.auto.commit"] = False
        consumer: Any = ConfluentConsumer(config)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        assigned.append(time.monotonic())
        return consumer
    if impl.startswith("confluent-848"):
        consumer = ConfluentConsumer({**config, "group.protocol": "consumer"})
    else:
        consumer = OurConsumer(config)

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        if partitions and not assigned:
            assigned.append(time.monotonic())

    consumer.subscribe([topic], on_assign=on_assign)
    return consumer


def _drain_poll(consumer: Any, total: int, deadline: float, marks: StallMarks) -> int:
    count = 0
    poll = consumer.poll
    every = POLL_MARK_EVERY - 1
    while count < total:
        message = poll(1.0)
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
    return count


def _drain_consume(consumer: Any, total: int, deadline: float, marks: StallMarks) -> int:
    count = 0
    consume = consumer.consume
    while count < total:
        batch = consume(BATCH, 1.0)
        if not batch:
            if time.monotonic() > deadline:
                break
            continue
        good = sum(1 for message in batch if message.error() is None)
        if good:
            marks.mark()
        count += good
    return count


def run_once(
    impl: str,
    bootstrap: str,
    topic: str,
    total: int,
    size: int,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Consume ``total`` records of ``topic`` with ``impl`` (librdkafka keys ``overrides`` given
    to either client); rate from the assignment to the last record, and the fetch stalls."""
    drain: Callable[[Any, int, float, StallMarks], int] = (
        _drain_consume if impl.endswith("consume") else _drain_poll
    )
    start = time.monotonic()
    assigned: list[float] = []
    marks = StallMarks()
    consumer = _make(impl, bootstrap, topic, assigned, overrides or {})
    try:
        count = drain(consumer, total, start + max(60.0, total / 2_000), marks)
        end = time.monotonic()
    finally:
        consumer.close()
    return run_figures(
        impl,
        count=count,
        total=total,
        size=size,
        start_s=start,
        assigned_s=assigned[0] if assigned else start,
        end_s=end,
        marks=marks,
    )


def profile_once(impl: str, bootstrap: str, topic: str, total: int) -> str:
    """pyinstrument text profile (app thread) of one run of ``impl``."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        return "(pyinstrument not installed)"
    profiler = Profiler(interval=0.0005)
    profiler.start()
    run_once(impl, bootstrap, topic, total, 0)
    profiler.stop()
    out = io.StringIO()
    out.write(profiler.output_text(unicode=False, color=False, show_all=False))
    return out.getvalue()


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Stats, ratios of medians, CPU per record and stalls of one setting's runs."""

    def per_impl(key: str) -> dict[str, Any]:
        return {
            impl: summary([r[key] for r in runs if r["impl"] == impl and key in r])
            for impl in IMPLEMENTATIONS
        }

    stats, steady = per_impl("records_per_s"), per_impl("steady_records_per_s")
    busy = per_impl("busy_records_per_s")

    def ratios(table: dict[str, Any]) -> dict[str, float]:
        med = {impl: float(table[impl]["median"]) for impl in IMPLEMENTATIONS}
        return {
            "c/b": ratio(med["ours-poll"], med["confluent-848-poll"]),
            "d/b": ratio(med["ours-consume"], med["confluent-848-poll"]),
            "d/b'": ratio(med["ours-consume"], med["confluent-848-consume"]),
            "c/a": ratio(med["ours-poll"], med["confluent-assign"]),
        }

    return {
        "runs": runs,
        "stats": stats,
        "steady_stats": steady,
        "ratios": ratios(stats),
        "steady_ratios": ratios(steady),
        "busy_stats": busy,
        "busy_ratios": ratios(busy),
        "stall_stats": per_impl("stalls"),
        "thread_cpu_us_per_record": per_impl("thread_cpu_us_per_record"),
        "process_cpu_us_per_record": per_impl("process_cpu_us_per_record"),
        "by_stalls": by_stalls(runs, SHAPES),
    }


def run(bootstrap: str, size: str, repeat: int, profile: bool = True) -> dict[str, Any]:
    """The whole throughput benchmark; returns the JSON-ready result.

    Per workload, the ``default`` setting's summary sits at the top level (the shape earlier
    results have) and every other setting of :data:`PREFETCH` under ``"prefetch"``.
    """
    results: dict[str, Any] = {
        "partitions": PARTITIONS,
        "batch": BATCH,
        "prefetch": PREFETCH,
        "stall_s": STALL_S,
        "workloads": {},
    }
    profiles: dict[str, str] = {}
    cases = [(impl, setting) for setting in PREFETCH for impl in IMPLEMENTATIONS]
    for work in workloads(size):
        topic = ensure_topic(bootstrap, work)
        runs: dict[str, list[dict[str, Any]]] = {setting: [] for setting in PREFETCH}
        for rep in range(repeat):
            shift = (rep * 3) % len(cases)  # rotates the ways and the settings
            for impl, setting in cases[shift:] + cases[:shift]:
                outcome = run_with_cpu(
                    functools.partial(run_once, overrides=PREFETCH[setting]),
                    impl,
                    bootstrap,
                    topic,
                    work.count,
                    work.size,
                )
                outcome["repetition"] = rep
                outcome["prefetch"] = setting
                runs[setting].append(outcome)
                log(
                    f"throughput {work.label} {setting} {impl}: "
                    f"{outcome['records_per_s']:,.0f} rec/s ({outcome['consumed']}/{work.count}), "
                    f"{outcome['thread_cpu_us_per_record']:.2f} us CPU/record (thread)"
                )
        results["workloads"][work.label] = {
            "topic": topic,
            "count": work.count,
            "size": work.size,
            **summarise(runs["default"]),
            "prefetch": {
                setting: summarise(runs[setting]) for setting in PREFETCH if setting != "default"
            },
        }
        if profile and work.label == "100B":
            sample = min(work.count, 200_000)
            for impl in ("ours-poll", "confluent-848-poll"):
                profiles[f"{work.label}-{impl}"] = profile_once(impl, bootstrap, topic, sample)
    results["profiles"] = profiles
    return results
