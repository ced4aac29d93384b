"""Fixtures shared by the client's sans-broker tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumer import Consumer
from consumer.member import MemberState


class _Stable:
    """The runtime's handle as ``poll()`` reads it: a STABLE member."""

    state = MemberState.STABLE


@pytest.fixture
def stable_consumer() -> Iterator[Consumer]:
    """A ``Consumer`` whose member reads STABLE and which has one partition assigned, without a
    broker (its runtime is started against a refused address). Tests replace the data plane's
    librdkafka consumer; it, the held records and the runtime are put back before closing."""
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "stable"})
    runtime = consumer._runtime  # noqa: SLF001
    dataplane = consumer._dataplane  # noqa: SLF001
    librdkafka = dataplane._consumer  # noqa: SLF001
    consumer._runtime = _Stable()  # type: ignore[assignment]  # noqa: SLF001
    dataplane._assigned.add(("topic", 0))  # noqa: SLF001 - something is assigned
    try:
        yield consumer
    finally:
        dataplane._assigned.clear()  # noqa: SLF001
        dataplane.held.clear()
        dataplane._consumer = librdkafka  # noqa: SLF001
        dataplane.held._consume = librdkafka.consume  # noqa: SLF001
        consumer._runtime = runtime  # noqa: SLF001
        consumer.close(timeout=1)
