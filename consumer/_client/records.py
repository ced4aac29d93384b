"""``poll()`` and ``consume()`` of :class:`consumer.Consumer`, with their fast paths.

Each call serves the background's events (rebalance callbacks first), stamps and reports the
poll (:mod:`consumer._client.polling`), then waits on the data plane in slices. While records
flow and the background has queued nothing for this thread, a fast path skips that full turn:

* ``poll()`` takes the next record of a batch taken from librdkafka with ``consume(n, 0)``
  (:mod:`consumer._client.held`: one librdkafka call per batch instead of one per record), for
  at most ``FAST_POLL_BUDGET`` records; when the budget is spent and nothing came from the
  background meanwhile, a *renewal* does the full turn's duties (serve, stamp, report) without
  its waits and arms a new budget;
* ``consume()`` returns full batches for at most ``FAST_CONSUME_WINDOW_S``.

The background disarms both (:meth:`RecordMethods._disarm_fast_poll`) whenever it queues an
event for this thread, so the next call takes the full turn and serves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Message

from consumer._bridge.handle import RuntimeHandle
from consumer._bridge.messages import ToAppEvent
from consumer._bridge.queues import ToApplication
from consumer._client.app_thread import AppThreadServer
from consumer._client.dataplane import DataPlane
from consumer._client.manual import ManualAssignment
from consumer._client.offsets import OffsetBook
from consumer._client.polling import (
    FAST_CONSUME_WINDOW_S,
    FAST_POLL_BUDGET,
    MIN_WAIT_S,
    PollReporter,
    PollSlices,
    deadline_s,
    whole_ms,
)
from consumer.member import MemberState, TopicPartition

__all__ = ["RecordMethods"]


class RecordMethods:
    """Base of :class:`consumer.Consumer`: ``poll()`` and ``consume()``."""

    _runtime: RuntimeHandle | None
    _server: AppThreadServer
    _dataplane: DataPlane
    _manual: ManualAssignment
    _offsets: OffsetBook
    _polls: PollReporter
    _slices: PollSlices
    _to_application: ToApplication[ToAppEvent]
    #: True while the fast paths may run (set on the application thread, cleared by the
    #: background's listener whenever it queues an event for this thread).
    _fast_poll_ok: bool
    #: Records ``poll()``'s fast path may still return before its budget is renewed.
    _fast_polls_left: int
    #: Until when (``time.monotonic()``) ``consume()``'s fast path may return full batches.
    _fast_consume_until_s: float
    #: The next record held from the data plane's last batch (``IndexError`` when none is),
    #: bound once: poll()'s fast path takes a record with this one C call.
    _take_held: Callable[[], Message]

    def _init_records(self) -> None:
        """Set up the fast paths (called by ``__init__`` once the data plane and the server
        exist)."""
        self._fast_poll_ok = False
        self._fast_polls_left = 0
        self._fast_consume_until_s = 0.0
        self._take_held = self._dataplane.held.take
        self._to_application.add_listener(self._disarm_fast_poll)

    def _enter_poll(self, method: str = "poll") -> None:
        raise NotImplementedError

    # --- poll() ---------------------------------------------------------------------------------

    def poll(self, timeout: float | None = -1) -> Message | None:
        """Serve rebalance callbacks, then return one record (or event), or None on timeout."""
        # Fast path while records flow and the background has nothing for this thread: one
        # check and the next held record (a new batch when none is held). Every
        # FAST_POLL_BUDGET records the budget is renewed with a full turn's duties, which keeps
        # the liveness signal and the consumed offsets flowing.
        if self._fast_poll_ok:
            left = self._fast_polls_left - 1
            self._fast_polls_left = left
            if left > 0:
                try:
                    return self._take_held()
                except IndexError:
                    message = self._dataplane.take_now()
                    if message is not None:
                        return message
            else:
                return self._renew_fast_poll(timeout)
        return self._poll_slowly(timeout)

    def _renew_fast_poll(self, timeout: float | None) -> Message | None:
        """The budget is spent: serve the background, stamp and report the poll, and take the
        next record librdkafka already holds (the full path when it holds none, or when the
        background queued something since the fast path was armed)."""
        self._enter_poll()
        self._fast_poll_ok = False  # until _arm_fast_poll() says the conditions still hold
        server = self._server
        if not server.pending():
            server.serve()  # nothing queued: raises a pending error, if any
            self._signal_poll()
            message = self._dataplane.take_now()
            if message is not None:
                self._arm_fast_poll()
                return message
        return self._poll_slowly(timeout)

    def _poll_slowly(self, timeout: float | None) -> Message | None:
        self._enter_poll()
        self._fast_poll_ok = False
        deadline = deadline_s(timeout)
        while True:
            remaining, fetch_s = self._poll_turn(deadline)
            if events := self._server.take_error_events(1):
                return events[0]
            if fetch_s is not None:
                last = fetch_s >= remaining  # this wait runs to the deadline
                message = self._dataplane.poll(whole_ms(fetch_s) if last else fetch_s)
                if message is not None:
                    self._arm_fast_poll()
                    return message
                if last:
                    return None
            if remaining < MIN_WAIT_S:
                return None

    def _poll_turn(self, deadline: float) -> tuple[float, float | None]:
        """One turn of poll()/consume(): serve the background's events, report the poll.

        Returns the time left before ``deadline`` (measured after serving) and how long the
        data plane may be waited on now; ``None`` when nothing is assigned, in which case this
        turn has already waited (at most one slice) for the background's next event.
        """
        self._server.serve()
        self._signal_poll()
        remaining = deadline - time.monotonic()
        # No record while an async callback of consumer.aio is parked: it runs first.
        if self._dataplane.has_assignment and self._server.parked is None:
            return remaining, max(0.0, min(remaining, self._slice_s()))
        if remaining > 0:
            self._to_application.wait(min(remaining, self._slice_s()))
        # Serve the data plane's callbacks (stats_cb, logger, error_cb) as confluent-kafka's
        # poll() does whatever is assigned; an exception raised in one propagates from here.
        if (event := self._dataplane.poll_events()) is not None:
            self._server.add_error_event(event)
        return remaining, None

    def _arm_fast_poll(self) -> None:
        """Allow the fast path until the background queues something for this thread."""
        runtime = self._runtime
        state = MemberState.UNSUBSCRIBED if runtime is None else runtime.state
        if (
            (state is MemberState.STABLE or not self._server.subscribed)
            and not self._server.pending()
            and not self._server.in_callback
        ):
            self._fast_polls_left = FAST_POLL_BUDGET
            self._fast_poll_ok = True

    def _disarm_fast_poll(self) -> None:
        """Called from the background thread whenever it queues an event for this thread."""
        self._fast_poll_ok = False

    # --- consume() ------------------------------------------------------------------------------

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Serve rebalance callbacks, then return up to ``num_messages`` records."""
        if not isinstance(num_messages, int) or not 1 <= num_messages <= 1_000_000:
            raise ValueError(f"num_messages must be an int in 1..1000000, got {num_messages!r}")
        # Fast path while full batches flow and the background has nothing for this thread:
        # what librdkafka already holds, without waiting. The full path (serve the background,
        # stamp and report the poll with the consumed offsets) runs again on a short or empty
        # batch, on the background's next event, and at least every FAST_CONSUME_WINDOW_S.
        if self._fast_poll_ok and time.monotonic() < self._fast_consume_until_s:
            messages = self._dataplane.consume(num_messages, 0)
            if len(messages) == num_messages:
                return messages
            self._fast_poll_ok = False
            if messages:
                return messages
        return self._consume_slowly(num_messages, timeout)

    def _consume_slowly(self, num_messages: int, timeout: float | None) -> list[Message]:
        self._enter_poll("consume")
        self._fast_poll_ok = False
        deadline = deadline_s(timeout)
        while True:
            remaining, fetch_s = self._poll_turn(deadline)
            if events := self._server.take_error_events(num_messages):
                return events
            if fetch_s is not None:
                last = fetch_s >= remaining  # this wait runs to the deadline
                messages = self._dataplane.consume(
                    num_messages, whole_ms(fetch_s) if last else fetch_s
                )
                if len(messages) == num_messages:
                    self._arm_fast_consume()
                if messages or last:
                    return messages
            if remaining < MIN_WAIT_S:
                return []

    def _arm_fast_consume(self) -> None:
        """Allow consume()'s fast path for FAST_CONSUME_WINDOW_S (and poll()'s for its budget)."""
        self._arm_fast_poll()
        self._fast_consume_until_s = time.monotonic() + FAST_CONSUME_WINDOW_S

    # --- shared ---------------------------------------------------------------------------------

    def _slice_s(self) -> float:
        runtime = self._runtime
        return self._slices.slice_s(None if runtime is None else runtime.state)

    def _signal_poll(self) -> None:
        """Tell the member the application is alive (throttled), with its consumed offsets."""
        self._manual.poll()
        runtime = self._runtime  # a consumer that only assigns has no member to tell
        if runtime is not None and (
            self._server.subscribed or runtime.state is not MemberState.UNSUBSCRIBED
        ):
            self._polls.signal(runtime.state, self._consumed_offsets)

    def _consumed_offsets(self) -> dict[TopicPartition, int]:
        return self._offsets.consumed(self._server.owned)
