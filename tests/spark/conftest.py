"""Spark tier: one ``local[2]`` SparkSession and one real Kafka broker for the whole run.

The broker fixtures are the session's shared ones (``tests/conftest.py``). The tier records what
it costs: SparkSession start time, per-micro-batch durations (tests call
``tier_metrics.add_batches``) and the peak memory (PSS) of this process plus Spark's JVM and
Python workers, sampled by a thread, broker excluded. The numbers
are printed in the terminal summary and written to ``$KGM_SPARK_METRICS`` (JSON) when set.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from consumer.testing.pytest_plugin import KafkaCluster
from consumer.testing.real.broker import LocalBroker

# --- metrics --------------------------------------------------------------------------------------


@dataclass
class TierMetrics:
    """What the tier measured (see the module docstring)."""

    started: float = field(default_factory=time.monotonic)
    session_start_s: float | None = None
    batches_ms: dict[str, list[int]] = field(default_factory=dict)
    peak_pss_mb: float = 0.0
    peak_processes: int = 0
    excluded_pids: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)

    def add_batches(self, name: str, progress: list[dict[str, Any]]) -> None:
        """Record ``triggerExecution`` of each micro-batch of a query's ``recentProgress``."""
        durations = [int(p["durationMs"]["triggerExecution"]) for p in progress if p]
        self.batches_ms.setdefault(name, []).extend(durations)

    def sample(self) -> None:
        """Add up the PSS of this process and its descendants (broker subtree excluded)."""
        me = psutil.Process()
        excluded: set[int] = set()
        for pid in self.excluded_pids:
            try:
                broker = psutil.Process(pid)
                excluded |= {pid} | {p.pid for p in broker.children(recursive=True)}
            except psutil.Error:
                continue
        total, count = 0, 0
        for process in [me, *me.children(recursive=True)]:
            if process.pid in excluded:
                continue
            try:
                total += process.memory_full_info().pss
                count += 1
            except psutil.Error:
                continue
        self.peak_pss_mb = max(self.peak_pss_mb, total / 2**20)
        self.peak_processes = max(self.peak_processes, count)

    def run_sampler(self) -> threading.Thread:
        def loop() -> None:
            while not self._stop.wait(1.0):
                self.sample()

        thread = threading.Thread(target=loop, name="spark-tier-memory", daemon=True)
        thread.start()
        return thread

    def summary(self) -> dict[str, Any]:
        every = sorted(ms for values in self.batches_ms.values() for ms in values)
        return {
            "session_start_s": self.session_start_s,
            "micro_batches": len(every),
            "micro_batch_ms_median": every[len(every) // 2] if every else None,
            "micro_batch_ms_max": every[-1] if every else None,
            "micro_batch_ms_by_query": self.batches_ms,
            "peak_pss_mb": round(self.peak_pss_mb, 1),
            "peak_processes": self.peak_processes,
            "tier_duration_s": round(time.monotonic() - self.started, 1),
        }


_METRICS = TierMetrics()


@pytest.fixture(scope="session")
def tier_metrics(kafka_broker: KafkaCluster) -> Iterator[TierMetrics]:
    """The tier's metrics, sampling memory while the session lasts."""
    if isinstance(kafka_broker, LocalBroker) and kafka_broker.process is not None:
        _METRICS.excluded_pids.add(kafka_broker.process.pid)
    thread = _METRICS.run_sampler()
    yield _METRICS
    _METRICS._stop.set()
    thread.join(5)


@pytest.fixture(scope="session")
def spark(tier_metrics: TierMetrics) -> Iterator[Any]:
    """One ``local[2]`` SparkSession for the tier, with the kafka-group sources registered."""
    from consumer.spark import local_session

    began = time.monotonic()
    session = local_session(
        "kgm-spark-tier",
        master="local[2]",
        config={"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2"},
    )
    tier_metrics.session_start_s = round(time.monotonic() - began, 2)
    tier_metrics.sample()
    yield session
    tier_metrics.sample()
    session.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _METRICS.session_start_s is None:
        return
    summary = _METRICS.summary()
    terminalreporter.write_sep("-", "spark tier metrics")
    for key, value in summary.items():
        terminalreporter.write_line(f"{key}: {value}")
    target = os.environ.get("KGM_SPARK_METRICS")
    if target:
        Path(target).write_text(json.dumps(summary, indent=2))
