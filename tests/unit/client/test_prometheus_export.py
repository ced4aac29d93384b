"""consumer.prometheus: the member metrics as Prometheus text, read at scrape time."""

from __future__ import annotations

import prometheus_client  # the prometheus extra; the dev extra installs it, so CI has it
import pytest

from consumer.member import MemberState
from consumer.member.metrics import METRIC_NAMES, MemberMetrics
from consumer.prometheus import MemberMetricsCollector, register_member_metrics


class Member:
    """Stands for a Consumer: ``metrics()`` from a MemberMetrics on a manual clock."""

    def __init__(self) -> None:
        self.core = MemberMetrics(0)
        self.now_ms = 0
        self.epoch = 0
        self.reads = 0

    def metrics(self) -> dict[str, float]:
        self.reads += 1
        return self.core.snapshot(self.now_ms, self.epoch)

    def rebalance(self, start_ms: int, end_ms: int) -> None:
        self.core.state_changed(MemberState.RECONCILE_ASSIGNMENT, start_ms)
        self.core.state_changed(MemberState.STABLE, end_ms)
        self.now_ms = end_ms


def _sample(registry: object, name: str, **labels: str) -> float | None:
    value: float | None = registry.get_sample_value(name, labels)  # type: ignore[attr-defined]
    return value


def test_metrics_are_read_at_scrape_time_with_counters_and_gauges() -> None:
    registry = prometheus_client.CollectorRegistry()
    member = Member()
    register_member_metrics(member, registry, consumer="orders-1")
    reads_after_register = member.reads
    member.core.state_changed(MemberState.JOINING, 100)
    member.rebalance(200, 650)
    member.epoch = 4
    text = prometheus_client.generate_latest(registry).decode()
    assert member.reads == reads_after_register + 1  # one read per scrape, none in between
    assert "# TYPE kafka_consumer_coordinator_rebalance_total counter" in text
    assert "# TYPE kafka_consumer_coordinator_rebalance_latency_max gauge" in text
    assert _sample(registry, "kafka_consumer_coordinator_rebalance_total", consumer="orders-1") == 1
    latency = _sample(
        registry, "kafka_consumer_coordinator_rebalance_latency_max", consumer="orders-1"
    )
    assert latency == 450
    assert _sample(registry, "kafka_consumer_coordinator_member_epoch", consumer="orders-1") == 4
    joining = _sample(
        registry,
        "kafka_consumer_coordinator_time_in_state_ms_total",
        consumer="orders-1",
        state="JOINING",
    )
    assert joining == 100


def test_one_collector_exports_several_consumers_under_their_labels() -> None:
    registry = prometheus_client.CollectorRegistry()
    first, second = Member(), Member()
    second.rebalance(0, 30)
    second.rebalance(40, 100)
    collector = MemberMetricsCollector()
    collector.add(first, consumer="a")
    collector.add(second, consumer="b")
    registry.register(collector)
    assert _sample(registry, "kafka_consumer_coordinator_rebalance_total", consumer="a") == 0
    assert _sample(registry, "kafka_consumer_coordinator_rebalance_total", consumer="b") == 2
    collector.remove(second)
    assert _sample(registry, "kafka_consumer_coordinator_rebalance_total", consumer="b") is None
    names = {family.name for family in collector.describe()}
    assert len(names) == len(METRIC_NAMES) + 1  # and the per-state time


def test_label_names_must_match_and_label_values_be_unique() -> None:
    collector = MemberMetricsCollector()
    collector.add(Member(), consumer="a")
    with pytest.raises(ValueError, match=r"labels must be \['consumer'\]"):
        collector.add(Member(), client="b")
    with pytest.raises(ValueError, match="another consumer"):
        collector.add(Member(), consumer="a")
