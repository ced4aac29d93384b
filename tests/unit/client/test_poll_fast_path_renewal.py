"""``poll()``'s fast path and the renewal of its budget, without a broker.

The data plane's librdkafka consumer is replaced, for its ``poll`` (the full path's waits) and
its ``consume`` (the batches the fast path hands out), by a counter that always has records, and
the member's runtime (started against a refused address) is seen through a handle that says
STABLE, so the fast path arms and every full turn stamps the poll. What crosses the network is
covered by ``tests/integration/test_consume_fast_path.py`` and
``tests/integration/test_poll_batch.py``.
"""

from __future__ import annotations

import pytest

from consumer import Consumer
from consumer._client.held import HOLD_BATCH
from consumer._client.polling import FAST_POLL_BUDGET
from consumer.member import ShutDown


class _Records:
    """librdkafka's ``poll(timeout_s)`` and ``consume(n, timeout_s)`` with records always
    ready, numbered in the order they are taken; remembers each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []
        self._taken = 0

    def _next(self) -> str:
        self._taken += 1
        return f"record {self._taken}"

    def poll(self, timeout_s: float) -> object:
        self.calls.append(("poll", 1, timeout_s))
        return self._next()

    def consume(self, num_messages: int, timeout_s: float) -> list[object]:
        self.calls.append(("consume", num_messages, timeout_s))
        return [self._next() for _ in range(num_messages)]


@pytest.fixture
def consumer(stable_consumer: Consumer) -> Consumer:
    return stable_consumer


def _install(consumer: Consumer) -> _Records:
    """The same counter behind the data plane's waits and its batches."""
    records = _Records()
    dataplane = consumer._dataplane  # noqa: SLF001
    dataplane._consumer = records  # type: ignore[assignment]  # noqa: SLF001
    dataplane.held._consume = records.consume  # type: ignore[assignment]  # noqa: SLF001
    return records


def test_the_budget_is_renewed_with_a_stamp_and_without_waiting(consumer: Consumer) -> None:
    records = _install(consumer)
    last_poll = consumer._polls.last_poll  # noqa: SLF001
    assert consumer.poll(1.0) == "record 1"  # the full path arms the fast one
    stamped_ms = last_poll.polled_ms
    assert stamped_ms > 0
    assert consumer._fast_poll_ok  # noqa: SLF001

    for number in range(2, FAST_POLL_BUDGET + 1):
        assert consumer.poll(1.0) == f"record {number}"
    # The budget's last record came from the fast path: no stamp since the full path's.
    assert consumer._fast_polls_left == 1  # noqa: SLF001
    assert last_poll.polled_ms == stamped_ms

    last_poll.stamp(0)  # so that the renewal's stamp is seen whatever the clock says
    assert consumer.poll(1.0) == f"record {FAST_POLL_BUDGET + 1}"
    assert last_poll.polled_ms > 0, "the renewal stamps the poll"
    assert consumer._fast_poll_ok  # noqa: SLF001
    assert consumer._fast_polls_left == FAST_POLL_BUDGET  # noqa: SLF001
    # Only the first (full) path may wait, for one record; every other poll takes from a
    # batch of what librdkafka already holds, taken without waiting.
    kind, count, timeout_s = records.calls[0]
    assert (kind, count) == ("poll", 1)
    assert timeout_s > 0
    assert set(records.calls[1:]) == {("consume", HOLD_BATCH, 0)}
    assert len(records.calls) == 1 + -(-FAST_POLL_BUDGET // HOLD_BATCH)


def test_a_spent_budget_takes_the_full_path_when_the_background_queued_something(
    consumer: Consumer,
) -> None:
    records = _install(consumer)
    server = consumer._server  # noqa: SLF001
    assert consumer.poll(1.0) == "record 1"
    consumer._fast_polls_left = 1  # noqa: SLF001 - the budget's last poll comes next
    consumer._to_application.put(ShutDown())  # noqa: SLF001 - as the background does
    consumer._fast_poll_ok = True  # noqa: SLF001 - the arm raced with the event's listener
    assert not server.shut_down

    assert consumer.poll(1.0) == "record 2"
    assert server.shut_down, "the event was served before the next record"
    assert not server.pending()
    assert [kind for kind, _, _ in records.calls] == ["poll", "poll"]


def test_a_spent_budget_raises_a_pending_error_before_the_next_record(
    consumer: Consumer,
) -> None:
    records = _install(consumer)
    assert consumer.poll(1.0) == "record 1"
    consumer._fast_polls_left = 1  # noqa: SLF001
    consumer._server._pending_errors.append(RuntimeError("from a callback"))  # noqa: SLF001

    assert consumer._fast_poll_ok  # noqa: SLF001 - the renewal, not the full path, raises it
    with pytest.raises(RuntimeError, match="from a callback"):
        consumer.poll(1.0)
    assert len(records.calls) == 1
    assert not consumer._fast_poll_ok  # noqa: SLF001 - the next poll takes the full path
    assert consumer.poll(1.0) == "record 2"


def test_nothing_overtakes_held_records_while_poll_serves_only_events(
    consumer: Consumer,
) -> None:
    records = _install(consumer)
    dataplane = consumer._dataplane  # noqa: SLF001
    assert consumer.poll(1.0) == "record 1"
    assert consumer.poll(1.0) == "record 2"  # from a batch: the rest of it is held
    calls = len(records.calls)

    # A turn that takes no record (an async callback parked, say) only serves librdkafka's
    # events: while records are held it does not ask librdkafka, whose next record is newer.
    assert dataplane.poll_events() is None
    assert len(records.calls) == calls
    assert consumer.poll(1.0) == "record 3"

    dataplane.held.clear()
    assert dataplane.poll_events() == f"record {HOLD_BATCH + 2}"
    assert records.calls[-1] == ("poll", 1, 0)
