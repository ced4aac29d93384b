"""Prometheus export of ``Consumer.metrics()``: ``pip install 'kafka-group-member[prometheus]'``.

A collector reads each registered consumer's metrics when Prometheus scrapes, and only then:
between scrapes it costs nothing. Metric names are the keys of ``Consumer.metrics()`` with ``-``
turned into ``_`` and the prefix ``kafka_consumer_coordinator_`` (Java's metric group is
``consumer-coordinator-metrics``); the keys ending in ``-total`` and the per-state times are
counters, the rest gauges. Durations stay in milliseconds, as in Java and in ``metrics()``.

```python
from prometheus_client import start_http_server
from consumer.prometheus import register_member_metrics

register_member_metrics(consumer, consumer="orders-1")
start_http_server(9464)
```
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Protocol

from consumer.member.metrics import METRIC_NAMES, STATE_TIME_PREFIX
from consumer.member.states import MemberState

__all__ = ["PREFIX", "MemberMetricsCollector", "register_member_metrics"]

#: Prefix of every exported metric name.
PREFIX = "kafka_consumer_coordinator_"
_STATE_TIME = "time_in_state_ms"


class SupportsMetrics(Protocol):
    """Anything with ``metrics()`` returning ``{name: value}`` (``consumer.Consumer``)."""

    def metrics(self) -> dict[str, float]: ...


def _prometheus() -> Any:
    try:
        import prometheus_client.core
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "consumer.prometheus needs prometheus-client: "
            "pip install 'kafka-group-member[prometheus]'"
        ) from exc
    return prometheus_client.core


def _exported_name(key: str) -> str:
    return PREFIX + key.replace("-", "_")


class MemberMetricsCollector:
    """A Prometheus collector of the member metrics of any number of consumers.

    Each consumer is added with its own label values (:meth:`add`); every consumer of one
    collector must use the same label names. Register the collector once, with
    ``registry.register(collector)`` (or use :func:`register_member_metrics`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._label_names: tuple[str, ...] | None = None
        self._members: dict[tuple[str, ...], SupportsMetrics] = {}

    def add(self, consumer: SupportsMetrics, /, **labels: str) -> None:
        """Export ``consumer``'s metrics with these label values (e.g. ``consumer="orders-1"``).

        Raises:
            ValueError: the label names differ from those of the consumers added before, or
                another consumer already has these label values.
        """
        names = tuple(sorted(labels))
        values = tuple(str(labels[name]) for name in names)
        with self._lock:
            if self._label_names is not None and names != self._label_names:
                raise ValueError(
                    f"labels must be {list(self._label_names)} like the consumers added before, "
                    f"got {list(names)}"
                )
            if values in self._members and self._members[values] is not consumer:
                raise ValueError(f"another consumer is exported with the labels {labels!r}")
            self._label_names = names
            self._members[values] = consumer

    def remove(self, consumer: SupportsMetrics) -> None:
        """Stop exporting ``consumer`` (for example after ``close()``)."""
        with self._lock:
            self._members = {k: c for k, c in self._members.items() if c is not consumer}

    def describe(self) -> Iterator[Any]:
        """The metric families, without samples (lets a registry check names up front)."""
        yield from self._families(self._label_names or ()).values()

    def collect(self) -> Iterator[Any]:
        """One family per metric, one sample per consumer (read now)."""
        with self._lock:
            label_names = self._label_names or ()
            members = list(self._members.items())
        families = self._families(label_names)
        for label_values, consumer in members:
            for key, value in consumer.metrics().items():
                if key.startswith(STATE_TIME_PREFIX):
                    state = key[len(STATE_TIME_PREFIX) :]
                    families[_STATE_TIME].add_metric([*label_values, state], value)
                elif key in families:
                    families[key].add_metric(list(label_values), value)
        yield from families.values()

    @staticmethod
    def _families(label_names: tuple[str, ...]) -> dict[str, Any]:
        core = _prometheus()
        families: dict[str, Any] = {}
        for key, meaning in METRIC_NAMES.items():
            kind = core.CounterMetricFamily if key.endswith("-total") else core.GaugeMetricFamily
            families[key] = kind(_exported_name(key), meaning, labels=list(label_names))
        families[_STATE_TIME] = core.CounterMetricFamily(
            PREFIX + _STATE_TIME,
            f"ms spent in each member state ({', '.join(s.name for s in MemberState)})",
            labels=[*label_names, "state"],
        )
        return families


def register_member_metrics(
    consumer: SupportsMetrics,
    /,
    registry: Any = None,
    **labels: str,
) -> MemberMetricsCollector:
    """Export one consumer's metrics on ``registry``, a ``prometheus_client.CollectorRegistry``
    (default: prometheus-client's global ``REGISTRY``).

    For several consumers in one process, build one :class:`MemberMetricsCollector`, register it
    once and :meth:`~MemberMetricsCollector.add` each consumer with its own labels.
    """
    core = _prometheus()
    collector = MemberMetricsCollector()
    collector.add(consumer, **labels)
    (registry if registry is not None else core.REGISTRY).register(collector)
    return collector
