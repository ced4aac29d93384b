"""``poll()``'s fast path and the renewal of its budget, without a broker.

The data plane's librdkafka ``poll`` (called directly by the fast path, through ``DataPlane.poll``
by the full path's waits) is replaced by a counter that always has a record, and the
member's runtime (started against a refused address) is seen through a handle that says STABLE,
so the fast path arms and every full turn stamps the poll. What crosses the network is covered by
``tests/integration/test_consume_fast_path.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumer import Consumer
from consumer._client.polling import FAST_POLL_BUDGET
from consumer.member import MemberState, ShutDown


class _Records:
    """librdkafka's ``poll(timeout_s)`` with a record always ready; remembers each timeout."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def __call__(self, timeout_s: float) -> object:
        self.timeouts.append(timeout_s)
        return f"record {len(self.timeouts)}"


class _Stable:
    """The runtime's handle as ``poll()`` reads it: a STABLE member."""

    state = MemberState.STABLE


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "fast-path"})
    runtime = consumer._runtime  # noqa: SLF001
    consumer._runtime = _Stable()  # type: ignore[assignment]  # noqa: SLF001
    consumer._dataplane._assigned.add(("topic", 0))  # noqa: SLF001 - records are "fetched"
    try:
        yield consumer
    finally:
        consumer._dataplane._assigned.clear()  # noqa: SLF001
        consumer._runtime = runtime  # noqa: SLF001
        consumer.close(timeout=1)


def _install(consumer: Consumer) -> _Records:
    """The same counter behind the fast path and behind the data plane's waits."""
    records = _Records()
    consumer._raw_poll = records  # type: ignore[assignment]  # noqa: SLF001
    consumer._dataplane.poll = records  # type: ignore[assignment,method-assign]  # noqa: SLF001
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
    # Only the first (full) path may wait; every other poll takes what is already there.
    assert records.timeouts[0] > 0
    assert set(records.timeouts[1:]) == {0}


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
    assert len(records.timeouts) == 2


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
    assert len(records.timeouts) == 1
    assert not consumer._fast_poll_ok  # noqa: SLF001 - the next poll takes the full path
    assert consumer.poll(1.0) == "record 2"
