"""``consumer.aio.AsyncConsumer``: the KIP-848 member of :class:`consumer.Consumer`, for asyncio.

Everything runs on the event loop's thread except the member's own background thread, which the
synchronous ``Consumer`` has too. ``poll()`` / ``consume()`` take records from librdkafka without
blocking (``timeout=0``) and, when there are none, wait on the loop: for a notification from the
background thread (an assignment change, a callback to run, a commit result) or for a short
slice after which librdkafka is asked again (librdkafka cannot wake an event loop). A record is
never held across an ``await``, so cancelling a ``poll()`` loses nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from confluent_kafka import KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.last_poll import monotonic_ms
from consumer._bridge.messages import FetchCommitted
from consumer._client.commits import COMMIT_REPORT_GRACE_S, commit_outcome, sync_commit_timeout_ms
from consumer._client.consumer import Consumer
from consumer._client.errors import (
    ConsumerClosedError,
    ConsumerKafkaException,
    kafka_exception,
)
from consumer._client.offsets import COMMITTED_DEFAULT_TIMEOUT_S
from consumer._client.polling import deadline_s
from consumer.aio._callbacks import (
    CallbackRunner,
    UserCallback,
    bind_callback,
    in_callback,
    refuse_in_callback,
)
from consumer.aio._parts import ConsumerParts
from consumer.aio._wakeup import LoopWakeup
from consumer.config import ConfigError, wants_classic
from consumer.errors import KafkaConnectionError
from consumer.member import CloseRequested, ReportCommitResult, TopicPartition

__all__ = ["AsyncConsumer"]

T = TypeVar("T")

#: First wait after an empty look at librdkafka; doubled up to the Consumer's poll slice.
_FIRST_WAIT_S = 0.001
#: Longest wait while nothing is assigned (the background thread wakes the loop for events).
_IDLE_WAIT_S = 0.1
#: How much longer than its own timeout ``committed()`` waits for the loop's reply.
_COMMITTED_REPLY_GRACE_S = 1.0


class AsyncConsumer:
    """A Kafka consumer-group member (KIP-848) for asyncio applications.

    ``AsyncConsumer(config)`` takes the configuration of :class:`consumer.Consumer`. Records:
    ``await poll(timeout)``, ``await consume(n, timeout)`` or ``async for message in consumer``
    (until ``close()``). Rebalance callbacks ``callback(consumer, partitions)`` may be plain
    functions or ``async def``; both run on the event loop, and the rebalance waits for them.
    Use it from one event loop; its methods are not thread-safe.
    """

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        if wants_classic({**(config or {}), **kwargs}):
            raise ConfigError(
                "consumer.aio.AsyncConsumer runs the KIP-848 member only: 'group.protocol' must "
                "be 'consumer'; use consumer.Consumer for group.protocol=classic."
            )
        self._consumer = Consumer(config, **kwargs)
        self._parts = ConsumerParts.of(self._consumer)
        self._wakeup = LoopWakeup()
        self._parts.to_application.add_listener(self._wakeup.notify_threadsafe)
        self._server = self._parts.server
        self._sync_poll = self._consumer.poll
        self._take_held = self._consumer._take_held  # see _parts.py: poll()'s inline fast path
        self._callbacks = CallbackRunner(self._server)
        self._closing = False
        self._close_lock = asyncio.Lock()

    # --- the member ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """The member state: UNSUBSCRIBED, JOINING, ..., STABLE, FENCED, STALE, FATAL."""
        return self._consumer.state

    @property
    def member_epoch(self) -> int:
        """The member epoch the coordinator gave this member (0 before joining)."""
        return self._consumer.member_epoch

    def memberid(self) -> str | None:
        """The member id, or None before subscribing."""
        return self._consumer.memberid()

    def add_member_listener(self, listener: Any) -> None:
        """As :meth:`consumer.Consumer.add_member_listener`; listeners run on the event loop."""
        self._consumer.add_member_listener(listener)

    def remove_member_listener(self, listener: Any) -> None:
        """Stop calling ``listener``; raises ``ValueError`` if it was not added."""
        self._consumer.remove_member_listener(listener)

    # --- subscription -------------------------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: UserCallback | None = None,
        on_revoke: UserCallback | None = None,
        on_lost: UserCallback | None = None,
    ) -> None:
        """Subscribe to topics (a name starting with ``^`` is a regex).

        Callbacks receive this ``AsyncConsumer`` and a list of ``TopicPartition``; an
        ``async def`` callback is awaited on the loop before the rebalance goes on.
        """
        refuse_in_callback("subscribe")
        self._consumer.subscribe(
            topics,
            on_assign=bind_callback(self, "on_assign", on_assign),
            on_revoke=bind_callback(self, "on_revoke", on_revoke),
            on_lost=bind_callback(self, "on_lost", on_lost),
        )

    def unsubscribe(self) -> None:
        """Leave the group (``on_revoke`` runs in a later ``poll()``); the consumer stays usable."""
        refuse_in_callback("unsubscribe")
        self._consumer.unsubscribe()

    # --- records ------------------------------------------------------------------------------

    async def poll(
        self,
        timeout: float | None = -1,  # noqa: ASYNC109 - confluent-kafka's signature
    ) -> Message | None:
        """Run due rebalance callbacks, then return one record (or event), or None on timeout.

        ``timeout`` in seconds; None or negative: wait until a record comes or ``close()``.
        """
        # The common case first: a record held from the data plane's last batch, taken as
        # Consumer.poll's fast path does (inline: no further Python call per record). The
        # Consumer arms that path only while its member is STABLE with nothing queued for this
        # thread and no callback running or parked; its budget makes every FAST_POLL_BUDGET-th
        # poll take the full way. The last poll of the budget is left to Consumer.poll, whose
        # full path resets it.
        consumer = self._consumer
        if (
            consumer._fast_poll_ok
            and consumer._fast_polls_left > 1
            and not self._closing
            and not in_callback()
        ):
            consumer._fast_polls_left -= 1
            try:
                return self._take_held()
            except IndexError:
                pass  # no record held: Consumer.poll takes the next batch
        refuse_in_callback("poll")
        return await self._wait_for(lambda: self._sync_poll(0), timeout)

    async def consume(
        self,
        num_messages: int = 1,
        timeout: float | None = -1,  # noqa: ASYNC109 - confluent-kafka's signature
    ) -> list[Message]:
        """Run due rebalance callbacks, then return up to ``num_messages`` records ([] on
        timeout or ``close()``)."""
        refuse_in_callback("consume")
        messages = await self._wait_for(
            lambda: self._consumer.consume(num_messages, 0) or None, timeout
        )
        return messages or []

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self) -> Message:
        """The next record or event; ends when the consumer is closed."""
        message = await self.poll(None)
        if message is None:
            raise StopAsyncIteration
        return message

    async def _wait_for(self, take: Callable[[], T | None], timeout_s: float | None) -> T | None:
        """Call ``take()`` (a non-blocking poll) until it returns something, the deadline
        passes or ``close()`` starts; in between, run parked callbacks and wait on the loop."""
        self._check_open()
        self._wakeup.bind()
        deadline = deadline_s(timeout_s)
        wait_s = _FIRST_WAIT_S
        while True:
            await self._callbacks.finish()
            if self._closing:
                return None
            found = take()
            if found is not None:
                return found
            if self._parts.server.parked is not None:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            limit_s = self._parts.slice_s() if self._parts.has_assignment() else _IDLE_WAIT_S
            wait_s = min(wait_s, limit_s)
            await self._wakeup.wait(min(remaining, wait_s))
            wait_s *= 2

    # --- offsets ------------------------------------------------------------------------------

    async def commit(
        self,
        message: Message | None = None,
        offsets: list[KafkaTopicPartition] | None = None,
        asynchronous: bool = False,
    ) -> list[KafkaTopicPartition] | None:
        """Commit offsets (those consumed so far when none are given) and wait for the result.

        Returns the committed partitions; raises ``KafkaException`` on an error. With
        ``asynchronous=True`` it returns None at once and the result goes to ``on_commit``.
        Cancelling the wait does not withdraw the commit, which the member may still send.
        """
        self._check_open()
        self._wakeup.bind()
        if asynchronous:
            return self._consumer.commit(message, offsets, asynchronous=True)
        parts = self._parts
        timeout_ms = sync_commit_timeout_ms(
            parts.config.max_poll_interval_ms, parts.last_poll_report_ms, monotonic_ms()
        )
        results: list[ReportCommitResult] = []

        def on_result(_offsets: dict[TopicPartition, int], result: ReportCommitResult) -> None:
            results.append(result)

        token, reported = parts.offsets.request_commit(
            parts.server, message, offsets, timeout_ms, parts.ensure_runtime, on_result
        )
        deadline = time.monotonic() + timeout_ms / 1000 + COMMIT_REPORT_GRACE_S
        try:
            while True:
                parts.server.take_commit_results()
                if results:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise kafka_exception(
                        KafkaError._TIMED_OUT, f"commit timed out after {timeout_ms / 1000} s"
                    )
                await self._wakeup.wait(remaining)
        finally:
            parts.server.commit_waiters.pop(token, None)
        error, partitions = commit_outcome(reported, results[0])
        if error is not None:
            raise ConsumerKafkaException(error)
        return partitions

    def store_offsets(
        self, message: Message | None = None, offsets: list[KafkaTopicPartition] | None = None
    ) -> None:
        """Store offsets for the next commit (needs ``enable.auto.offset.store=false``)."""
        self._consumer.store_offsets(message, offsets)

    async def committed(
        self,
        partitions: list[KafkaTopicPartition],
        timeout: float | None = -1,  # noqa: ASYNC109 - confluent-kafka's signature
    ) -> list[KafkaTopicPartition]:
        """The committed offsets of ``partitions`` (OffsetFetch with the member epoch)."""
        self._check_open()
        self._wakeup.bind()
        runtime = self._parts.ensure_runtime()
        wanted = tuple(TopicPartition(tp.topic, tp.partition) for tp in partitions)
        timeout_s = (
            COMMITTED_DEFAULT_TIMEOUT_S if timeout is None or timeout < 0 else float(timeout)
        )
        if runtime.finished:
            raise KafkaConnectionError("the consumer's background loop is not running")
        request = FetchCommitted(wanted, timeout_s)
        self._parts.to_background.put(request)
        try:
            async with asyncio.timeout(timeout_s + _COMMITTED_REPLY_GRACE_S):
                # Shielded: cancelling this wait must not cancel the future the loop completes.
                result = await asyncio.shield(asyncio.wrap_future(request.reply))
        except TimeoutError:
            raise kafka_exception(
                KafkaError._TIMED_OUT, f"committed() timed out after {timeout_s} s"
            ) from None
        return [
            KafkaTopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in zip(wanted, result, strict=True)
        ]

    def position(self, partitions: list[KafkaTopicPartition]) -> list[KafkaTopicPartition]:
        """The offset of the next record to return, per partition (OFFSET_INVALID if unknown)."""
        return self._consumer.position(partitions)

    def assignment(self) -> list[KafkaTopicPartition]:
        """The partitions this member owns now."""
        return self._consumer.assignment()

    # --- fetch control ------------------------------------------------------------------------

    def pause(self, partitions: list[KafkaTopicPartition]) -> None:
        """Stop returning records of these partitions until ``resume()``."""
        self._consumer.pause(partitions)

    def resume(self, partitions: list[KafkaTopicPartition]) -> None:
        """Resume paused partitions."""
        self._consumer.resume(partitions)

    def seek(self, partition: KafkaTopicPartition) -> None:
        """Move the fetch position of an owned partition."""
        self._consumer.seek(partition)

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_assign``: start these partitions at the offsets given (if any)."""
        self._consumer.incremental_assign(partitions)

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_assign``: as :meth:`incremental_assign`."""
        self._consumer.assign(partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_revoke`` / ``on_lost``: accepted and ignored (the member unassigns)."""
        self._consumer.incremental_unassign(partitions)

    def unassign(self) -> None:
        """Inside ``on_revoke`` / ``on_lost``: accepted and ignored (the member unassigns)."""
        self._consumer.unassign()

    # --- close --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop ``poll()`` / ``consume()`` / ``async for`` (they return None, [], or end),
        commit (with auto-commit), run ``on_revoke``, leave the group and stop the member."""
        refuse_in_callback("close")
        self._wakeup.bind()
        async with self._close_lock:  # a second close() waits for the first
            if self._parts.closed:
                return
            self._closing = True
            self._wakeup.notify()
            await self._leave_group()
            # The member has left: what remains (ending its thread, closing librdkafka) is quick.
            self._consumer.close()

    async def _leave_group(self) -> None:
        """The asynchronous half of ``Consumer.close()``: serve the loop's events, await the
        callbacks, until the member reports it shut down (or its loop ended)."""
        parts = self._parts
        server = parts.server
        await self._callbacks.finish()
        runtime = parts.runtime
        if runtime is None or runtime.finished:
            return
        parts.offsets.report_consumed(server.owned)
        parts.to_background.put(CloseRequested())
        deadline = time.monotonic() + parts.config.max_poll_interval_ms / 1000
        while not server.shut_down and not runtime.finished:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                server.serve()
            except ConsumerKafkaException:
                if server.fatal_error is not None:
                    return
            if server.parked is not None:
                await self._callbacks.finish()
                continue
            await self._wakeup.wait(min(remaining, _IDLE_WAIT_S))

    async def __aenter__(self) -> AsyncConsumer:
        self._wakeup.bind()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._parts.closed:
            raise ConsumerClosedError("the consumer is closed")
