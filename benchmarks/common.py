"""Shared helpers: machine facts, statistics, brokers, topics and result files."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
DEFAULT_DOCS_DIR = REPO_ROOT / "docs"

#: Broker settings of the "default timers" broker: KIP-848's defaults (5 s heartbeat interval,
#: 45 s session timeout) on top of the launcher's fast settings (which also switch off
#: assignment batching and the classic initial rebalance delay).
DEFAULT_TIMER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
}
FAST_HEARTBEAT_MS = 500
FAST_SESSION_MS = 6000


def monotonic() -> float:
    """``time.monotonic()``: system-wide on Linux, so comparable across processes."""
    return time.monotonic()


# --- statistics -------------------------------------------------------------------------------


def summary(values: Sequence[float]) -> dict[str, float | int]:
    """Median, min, max, mean and count of ``values`` (NaN-free; empty gives zeros)."""
    clean = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not clean:
        return {"n": 0, "median": 0.0, "min": 0.0, "max": 0.0, "mean": 0.0}
    return {
        "n": len(clean),
        "median": statistics.median(clean),
        "min": min(clean),
        "max": max(clean),
        "mean": statistics.fmean(clean),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; 0.0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ratio(a: float, b: float) -> float:
    """a / b, or 0.0 when b is 0."""
    return a / b if b else 0.0


# --- machine facts ----------------------------------------------------------------------------


def machine_facts() -> dict[str, Any]:
    """CPU, memory, OS and library versions, plus the load average right now."""
    from importlib.metadata import version

    import confluent_kafka

    facts: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "confluent_kafka": version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "loadavg": list(os.getloadavg()),
    }
    facts["git"] = _git_state()
    with contextlib.suppress(ImportError):
        import psutil

        facts["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    return facts


def _git_state() -> str:
    """``<short commit>`` plus ``+N modified library files`` when consumer/ differs from it."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "consumer"],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        ).stdout.splitlines()
    except OSError:
        return "unknown"
    return f"{head} (+{len(dirty)} uncommitted changes under consumer/)" if dirty else head


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


# --- brokers ----------------------------------------------------------------------------------


@dataclass
class BrokerSet:
    """The brokers the benchmarks run against, started lazily and stopped at the end.

    ``fast`` is the launcher's default (500 ms heartbeat interval, 6 s session timeout) or the
    cluster named by ``KAFKA_BOOTSTRAP_SERVERS`` / ``--bootstrap``; ``default_timers`` is a second
    broker with KIP-848's default timers (5 s / 45 s), started only when a benchmark asks.
    """

    fast_bootstrap: str | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _default_timers: str | None = None

    def fast(self) -> str:
        """Bootstrap servers of the 500 ms broker (started on first use)."""
        if self.fast_bootstrap is None:
            self.fast_bootstrap = self._start({})
        return self.fast_bootstrap

    def default_timers(self) -> str:
        """Bootstrap servers of the 5 s / 45 s broker (started on first use)."""
        if self._default_timers is None:
            self._default_timers = self._start(DEFAULT_TIMER_OVERRIDES)
        return self._default_timers

    def _start(self, overrides: Mapping[str, str]) -> str:
        from consumer.testing.real.broker import LocalBroker
        from consumer.testing.real.kafka_jars import BrokerStartError

        print(f"[bench] starting a local broker {dict(overrides) or '(fast defaults)'}", flush=True)
        for attempt in (1, 2, 3):
            try:
                broker = self._stack.enter_context(LocalBroker(overrides=dict(overrides)))
                return broker.bootstrap_servers
            except BrokerStartError as exc:  # e.g. a random cluster id starting with "-"
                if attempt == 3:
                    raise
                print(f"[bench] broker start failed, retrying: {str(exc)[:200]}", flush=True)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop every broker this set started."""
        self._stack.close()


# --- topics and records -----------------------------------------------------------------------


def admin_client(bootstrap: str) -> AdminClient:
    """An AdminClient for ``bootstrap``."""
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_partitions(bootstrap: str, topic: str) -> int | None:
    """Partition count of ``topic`` or None if it does not exist."""
    # list_topics(topic) would auto-create the topic on brokers that allow it: list them all.
    metadata = admin_client(bootstrap).list_topics(timeout=10)
    entry = metadata.topics.get(topic)
    if entry is None or entry.error is not None:
        return None
    return len(entry.partitions)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` and wait until its leaders are known."""
    admin = admin_client(bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=60
    )
    futures[topic].result(timeout=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # metadata propagation: a bounded predicate wait
        if topic_partitions(bootstrap, topic) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} did not appear with {partitions} partitions")


def warm_topic_for_groups(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = 120
) -> None:
    """Wait until the broker's group coordinator assigns every partition of a new ``topic``.

    A KIP-848 group that subscribes to a topic created moments before can get an empty
    assignment for seconds (seen: 6 s for a 900-partition topic on the 500 ms test broker) until
    the coordinator's view of the topic catches up. A benchmark that measures its first group on
    such a topic measures the broker, and penalises whichever client goes first. One throw-away
    confluent-kafka KIP-848 member subscribes until its callbacks hold every partition.
    """
    from confluent_kafka import Consumer as ConfluentConsumer

    owned: set[int] = set()

    def on_assign(_consumer: Any, assigned: list[Any]) -> None:
        owned.update(tp.partition for tp in assigned)

    member = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-warm-{uuid.uuid4().hex[:8]}",
            "group.protocol": "consumer",
        }
    )
    try:
        member.subscribe([topic], on_assign=on_assign)
        deadline = time.monotonic() + timeout_s
        while len(owned) < partitions:  # the member's own poll() is the wait
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the group coordinator assigned {len(owned)} of {partitions} partitions"
                    f" of {topic} in {timeout_s:.0f} s"
                )
            member.poll(0.1)
    finally:
        member.close()


def set_share_group_configs(bootstrap: str, group_id: str, configs: Mapping[str, str]) -> None:
    """Set share-group configs (e.g. ``share.auto.offset.reset``) on ``group_id`` before it first
    reads, and wait until the broker shows them."""
    from consumer.share_consumer import alter_share_group_configs

    alter_share_group_configs(admin_client(bootstrap), group_id, configs)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark per partition."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        probe.close()


def produce(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> float:
    """Produce ``count`` records of ``size`` B round-robin over ``partitions``; seconds taken."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
            "acks": 1,
        }
    )
    payload = b"x" * size
    start = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} records were not delivered to {topic}")
    return time.monotonic() - start


# --- results ----------------------------------------------------------------------------------


def write_result(results_dir: Path, name: str, payload: Mapping[str, Any]) -> Path:
    """Write ``results_dir/<name>.json`` (pretty, sorted)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, sort_keys=True, default=_json_default) + "\n")
    return path


def _json_default(value: object) -> object:
    if isinstance(value, set | frozenset | tuple):
        return sorted(value)
    raise TypeError(f"not JSON serialisable: {value!r}")


def read_results(results_dir: Path) -> dict[str, dict[str, Any]]:
    """Every ``<name>.json`` in ``results_dir``, by name."""
    found: dict[str, dict[str, Any]] = {}
    if results_dir.is_dir():
        for path in sorted(results_dir.glob("*.json")):
            with contextlib.suppress(ValueError):
                found[path.stem] = json.loads(path.read_text())
    return found


def wait_for(
    predicate: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.05
) -> None:
    """Poll ``predicate`` until true; TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(step_s)


def log(message: str) -> None:
    """Progress line on stdout."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of at most ``size`` items."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
