"""``poll(timeout)`` / ``consume(n, timeout)`` with nothing to return: the last wait in
librdkafka runs to the deadline, rounded up to whole milliseconds (librdkafka truncates waits
to whole milliseconds), and the call returns after it. It used to end a fraction of a
millisecond early and take one more turn, with one more call into librdkafka, to run out.

librdkafka's consumer is replaced by one that has no records and waits as long as asked; the
runtime (started against a refused address) is seen through a handle that says STABLE.
"""

from __future__ import annotations

import math
import time

import pytest

from consumer import Consumer


class _NoRecords:
    """librdkafka's ``poll`` and ``consume`` with nothing to fetch; remembers each wait."""

    def __init__(self) -> None:
        self.waits_s: list[float] = []

    def poll(self, timeout_s: float) -> None:
        self.waits_s.append(timeout_s)
        time.sleep(timeout_s)  # what librdkafka does with an empty queue

    def consume(self, num_messages: int, timeout_s: float) -> list[object]:
        self.poll(timeout_s)
        return []


@pytest.fixture
def consumer(stable_consumer: Consumer) -> Consumer:
    return stable_consumer


def _install(consumer: Consumer, *, quiet_for_s: float) -> _NoRecords:
    fake = _NoRecords()
    consumer._dataplane._consumer = fake  # type: ignore[assignment]  # noqa: SLF001
    consumer._quiet.promise(time.monotonic() + quiet_for_s)  # noqa: SLF001
    return fake


def _whole_ms(wait_s: float) -> bool:
    return math.isclose(wait_s * 1000, round(wait_s * 1000), abs_tol=1e-6)


@pytest.mark.parametrize("method", ["poll", "consume"])
def test_one_wait_to_the_deadline_while_quiet(consumer: Consumer, method: str) -> None:
    fake = _install(consumer, quiet_for_s=60)
    started = time.monotonic()
    result = consumer.poll(0.05) if method == "poll" else consumer.consume(10, 0.05)
    elapsed_s = time.monotonic() - started
    assert result in (None, [])
    assert len(fake.waits_s) == 1, fake.waits_s
    assert fake.waits_s[0] >= 0.049
    assert _whole_ms(fake.waits_s[0])
    assert elapsed_s >= 0.049


@pytest.mark.parametrize("method", ["poll", "consume"])
def test_short_slices_end_with_the_deadline(consumer: Consumer, method: str) -> None:
    fake = _install(consumer, quiet_for_s=0)  # no promise: 10 ms slices
    started = time.monotonic()
    result = consumer.poll(0.035) if method == "poll" else consumer.consume(10, 0.035)
    elapsed_s = time.monotonic() - started
    assert result in (None, [])
    *slices, last = fake.waits_s
    assert slices, fake.waits_s
    assert all(math.isclose(s, 0.01) for s in slices), fake.waits_s
    # The last wait is what is left, in whole ms (0 if a slice overran the deadline), and no
    # further wait follows it.
    assert 0 <= last <= 0.01, fake.waits_s
    assert _whole_ms(last), fake.waits_s
    assert elapsed_s >= 0.034
