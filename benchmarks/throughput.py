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
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka import Consumer as ConfluentConsumer

from benchmarks.common import (
    create_topic,
    end_offsets,
    log,
    produce,
    ratio,
    summary,
    topic_partitions,
)
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


def _make(impl: str, bootstrap: str, topic: str, assigned: list[float]) -> Any:
    """The consumer; ``assigned`` receives the time its partitions were assigned."""
    config = _base_config(bootstrap)
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


def _drain_poll(consumer: Any, total: int, deadline: float) -> tuple[int, float | None]:
    count, first = 0, None
    poll = consumer.poll
    while count < total:
        message = poll(1.0)
        if message is None:
            if time.monotonic() > deadline:
                break
            continue
        if message.error() is None:
            if first is None:
                first = time.monotonic()
            count += 1
    return count, first


def _drain_consume(consumer: Any, total: int, deadline: float) -> tuple[int, float | None]:
    count, first = 0, None
    consume = consumer.consume
    while count < total:
        batch = consume(BATCH, 1.0)
        if not batch:
            if time.monotonic() > deadline:
                break
            continue
        good = sum(1 for message in batch if message.error() is None)
        if good and first is None:
            first = time.monotonic()
        count += good
    return count, first


def run_once(impl: str, bootstrap: str, topic: str, total: int, size: int) -> dict[str, Any]:
    """Consume ``total`` records of ``topic`` with ``impl``; rate from first to last record."""
    drain: Callable[[Any, int, float], tuple[int, float | None]] = (
        _drain_consume if impl.endswith("consume") else _drain_poll
    )
    start = time.monotonic()
    assigned: list[float] = []
    consumer = _make(impl, bootstrap, topic, assigned)
    try:
        count, first = drain(consumer, total, start + max(60.0, total / 2_000))
        end = time.monotonic()
    finally:
        consumer.close()
    begin = assigned[0] if assigned else start
    rate = ratio(count, end - begin)
    return {
        "impl": impl,
        "consumed": count,
        "expected": total,
        "records_per_s": rate,
        "steady_records_per_s": ratio(max(count - 1, 0), end - first) if first else 0.0,
        "mb_per_s": rate * size / 1e6,
        "assigned_s": begin - start,
        "first_record_s": (first - start) if first is not None else None,
        "total_s": end - start,
    }


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


def run(bootstrap: str, size: str, repeat: int, profile: bool = True) -> dict[str, Any]:
    """The whole throughput benchmark; returns the JSON-ready result."""
    results: dict[str, Any] = {"partitions": PARTITIONS, "batch": BATCH, "workloads": {}}
    profiles: dict[str, str] = {}
    for work in workloads(size):
        topic = ensure_topic(bootstrap, work)
        runs: list[dict[str, Any]] = []
        for rep in range(repeat):
            shift = rep % len(IMPLEMENTATIONS)
            order = IMPLEMENTATIONS[shift:] + IMPLEMENTATIONS[:shift]
            for impl in order:
                outcome = run_once(impl, bootstrap, topic, work.count, work.size)
                outcome["repetition"] = rep
                runs.append(outcome)
                log(
                    f"throughput {work.label} {impl}: {outcome['records_per_s']:,.0f} rec/s "
                    f"({outcome['consumed']}/{work.count})"
                )
        stats = {
            impl: summary([r["records_per_s"] for r in runs if r["impl"] == impl])
            for impl in IMPLEMENTATIONS
        }
        steady = {
            impl: summary([r["steady_records_per_s"] for r in runs if r["impl"] == impl])
            for impl in IMPLEMENTATIONS
        }
        med = {impl: float(stats[impl]["median"]) for impl in IMPLEMENTATIONS}
        smed = {impl: float(steady[impl]["median"]) for impl in IMPLEMENTATIONS}
        results["workloads"][work.label] = {
            "topic": topic,
            "count": work.count,
            "size": work.size,
            "runs": runs,
            "stats": stats,
            "steady_stats": steady,
            "steady_ratios": {
                "c/b": ratio(smed["ours-poll"], smed["confluent-848-poll"]),
                "d/b": ratio(smed["ours-consume"], smed["confluent-848-poll"]),
                "d/b'": ratio(smed["ours-consume"], smed["confluent-848-consume"]),
                "c/a": ratio(smed["ours-poll"], smed["confluent-assign"]),
            },
            "ratios": {
                "c/b": ratio(med["ours-poll"], med["confluent-848-poll"]),
                "d/b": ratio(med["ours-consume"], med["confluent-848-poll"]),
                "d/b'": ratio(med["ours-consume"], med["confluent-848-consume"]),
                "c/a": ratio(med["ours-poll"], med["confluent-assign"]),
            },
        }
        if profile and work.label == "100B":
            sample = min(work.count, 200_000)
            for impl in ("ours-poll", "confluent-848-poll"):
                profiles[f"{work.label}-{impl}"] = profile_once(impl, bootstrap, topic, sample)
    results["profiles"] = profiles
    return results
