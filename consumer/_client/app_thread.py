"""What the application thread does with the background's events, inside ``poll()``.

The background loop never calls user code and never touches the data plane. It queues commands;
:class:`AppThreadServer` executes them on the thread that calls ``poll()`` / ``consume()`` /
``close()``: it stops fetching revoked partitions, applies assignment changes to the data plane,
runs ``on_revoke`` / ``on_assign`` / ``on_lost`` with ``confluent_kafka.TopicPartition`` lists,
reports each completion back, and turns reported errors into exceptions (or error events).
"""

from __future__ import annotations

import collections
import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.member_events import (
    MemberEvent,
    RebalanceEvent,
    RebalanceKind,
    StateTransition,
    wall_clock_ms,
)
from consumer._bridge.messages import AppEvent, RuntimeFailed, StateChanged, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_callbacks import (
    CallbackFinish,
    Callbacks,
    CommitCallback,
    CommitWaiter,
    ParkedCallback,
    RebalanceCallback,
)
from consumer._client.dataplane import DataPlane
from consumer._client.error_events import PollOverrun, error_event
from consumer._client.errors import ConsumerKafkaException, kafka_exception
from consumer._client.fetching import FetchChanges
from consumer._client.start_offsets import StartOffsets
from consumer.member import (
    ApplyAssignment,
    CallbackCompleted,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ReportCommitResult,
    ReportError,
    RevocationCompleted,
    ShutDown,
    StartFetching,
    StopFetching,
    TopicPartition,
)

__all__ = [  # the callback records are re-exported for the modules that import them from here
    "AppThreadServer",
    "CallbackFinish",
    "Callbacks",
    "CommitCallback",
    "CommitWaiter",
    "ParkedCallback",
    "RebalanceCallback",
]

_log = logging.getLogger("consumer")


#: Group errors the member reports itself (fatal): the data plane's copies are dropped.
_MEMBER_REPORTED_ERRORS = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED})


@dataclass
class AppThreadServer(FetchChanges):
    """Executes background events on the application thread (see the module docstring)."""

    consumer: Any
    dataplane: DataPlane
    to_background: ToBackground[AppEvent]
    to_application: ToApplication[ToAppEvent]
    callbacks: Callbacks
    auto_offset_reset: str
    consumed_offsets: Callable[[Iterable[TopicPartition]], dict[TopicPartition, int]]
    owned: set[TopicPartition] = field(default_factory=set)
    #: Partitions the application assigned itself, outside callbacks (``_client/manual.py``).
    manual: set[TopicPartition] = field(default_factory=set)
    #: True between ``subscribe()`` and ``unsubscribe()``: commits must name owned partitions.
    subscribed: bool = False
    commit_waiters: dict[int, CommitWaiter] = field(default_factory=dict)
    fatal_error: ConsumerKafkaException | None = None
    #: Start offsets chosen by the application inside ``on_assign`` (None outside it).
    assign_overrides: dict[tuple[str, int], int] | None = None
    _pending_apply: ApplyAssignment | None = None
    shut_down: bool = False
    in_callback: bool = False
    _deferred: collections.deque[ToAppEvent] = field(default_factory=collections.deque)
    _pending_errors: collections.deque[BaseException] = field(default_factory=collections.deque)
    #: Held by the thread serving the queue (re-entrant: callbacks may commit synchronously).
    _serving: threading.RLock = field(default_factory=threading.RLock)
    #: Stamps the RebalanceEvents of member listeners (a simulation passes its own clock).
    clock_ms: Callable[[], int] = wall_clock_ms
    #: Positions of partitions whose fetching stopped before their ``on_revoke`` (dropped after
    #: it): ``position()`` inside ``on_revoke`` still answers, as in confluent-kafka and Java.
    stopped_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    #: The callback whose awaitable ``consumer.aio`` is running (``in_callback`` stays on).
    parked: ParkedCallback | None = None
    poll_overrun: PollOverrun | None = None  #: for the text of a _MAX_POLL_EXCEEDED event
    _error_events: collections.deque[Message] = field(default_factory=collections.deque)

    def __post_init__(self) -> None:
        #: Where new group partitions start, and those waiting for their start offsets.
        self.start_offsets = StartOffsets(self._reset_start)

    def assigned(self) -> set[TopicPartition]:
        """The current assignment: the group's partitions and the manually assigned ones."""
        return self.owned | self.manual if self.manual else self.owned

    def pending(self) -> bool:
        """True when there is something to serve (O(1))."""
        return bool(self._deferred) or bool(self.to_application)

    def serve(self) -> None:
        """Execute every queued event; raise the first error the application must see."""
        if not self._deferred and not self.to_application:
            if self.fatal_error is not None or self._pending_errors:
                self.raise_pending()
            return
        if not self.in_callback:
            with self._serving:
                while self.parked is None:
                    deferred = self._deferred
                    event = deferred.popleft() if deferred else self.to_application.pop()
                    if event is None:
                        break
                    self._execute(event)
        self.raise_pending()

    def raise_pending(self) -> None:
        """Raise a fatal error (every time) or a queued non-fatal one (once)."""
        if self.fatal_error is not None:
            raise self.fatal_error
        if self._pending_errors:
            raise self._pending_errors.popleft()

    def take_error_events(self, count: int) -> list[Message]:
        """Up to ``count`` error events for ``poll()`` / ``consume()`` to return: the member's,
        and the data plane's served while nothing was assigned (``add_error_event``)."""
        return [self._error_events.popleft() for _ in range(min(count, len(self._error_events)))]

    def add_error_event(self, event: Message) -> None:
        """Queue an event of the data plane for ``poll()`` / ``consume()`` to return.

        While a group member runs, the data plane's own copy of a group error it reports itself
        is dropped: librdkafka's handle carries the ``group.id`` and looks the coordinator up
        too, so its non-fatal GROUP_AUTHORIZATION_FAILED could race ahead of the member's fatal
        one (seen once in CI under load).
        """
        error = event.error()
        if self.subscribed and error is not None and error.code() in _MEMBER_REPORTED_ERRORS:
            return
        self._error_events.append(event)

    def take_commit_result(self, token: int, timeout_s: float) -> bool:
        """Wait for the result of user commit ``token`` without running other events.

        Used by synchronous ``commit()``, from the polling thread (maybe inside ``on_revoke``)
        or from any other thread, as confluent-kafka allows. Whoever holds the serving lock
        takes events off the queue: here only commit results and a dying loop are acted on,
        everything else is set aside, in order, for :meth:`serve`. A thread that cannot get
        the lock (another one is serving) waits for that thread to deliver the result.
        """
        waiter = self.commit_waiters.get(token)
        if waiter is None:
            return True
        deadline = time.monotonic() + timeout_s
        while not waiter.done.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            step_s = min(remaining, 0.05)
            if not self._serving.acquire(timeout=step_s):
                waiter.done.wait(step_s)
                continue
            try:
                while not waiter.done.is_set():
                    event = self.to_application.pop()
                    if event is None:
                        break
                    if isinstance(event, ReportCommitResult):
                        self._execute(event)
                    elif isinstance(event, RuntimeFailed):
                        self._execute(event)
                        self.raise_pending()
                    else:
                        self._deferred.append(event)
            finally:
                self._serving.release()
            if not waiter.done.is_set():
                self.to_application.wait(step_s)
        return True

    def take_commit_results(self) -> None:
        """Deliver the commit results queued so far and set other events aside for
        :meth:`serve`; never blocks (``consumer.aio`` awaits its commits with this)."""
        if not self._serving.acquire(blocking=False):
            return  # another thread serves: it delivers the results
        try:
            while (event := self.to_application.pop()) is not None:
                if isinstance(event, ReportCommitResult):
                    self._deliver_commit_result(event)
                elif isinstance(event, RuntimeFailed):
                    self._fail(event.error)
                else:
                    self._deferred.append(event)
        finally:
            self._serving.release()
        if self.fatal_error is not None:
            raise self.fatal_error

    def finish_parked(self, error: BaseException | None) -> None:
        """The parked callback's awaitable has finished (``error``: what it raised, which the
        next ``poll()`` raises if it is an ``Exception``, as for a synchronous callback)."""
        parked, self.parked = self.parked, None
        if parked is None:
            raise RuntimeError("finish_parked(): no rebalance callback is parked")
        self.in_callback = False
        message = None
        if error is not None:
            if isinstance(error, Exception):
                self._pending_errors.append(error)
            message = f"{type(error).__name__}: {error}"
        parked.finish(message)

    # --- one event ----------------------------------------------------------------------------

    def _execute(self, event: ToAppEvent) -> None:  # noqa: C901 - one arm per event type
        if self._pending_apply is not None and not isinstance(event, InvokeOnAssign):
            self._start_fetching(self._finish_apply({}))
        match event:
            case StopFetching(request_id=request_id, partitions=partitions):
                self._stop_fetching(request_id, partitions)
            case ApplyAssignment():
                self._apply(event)
            case StartFetching():
                self._start_fetching(self.start_offsets.answered(event, self.owned))
            case InvokeOnRevoke(request_id=request_id, partitions=partitions):
                finish = functools.partial(self._revoked, request_id, partitions)
                self._invoke(self.callbacks.on_revoke, partitions, finish)
            case InvokeOnAssign(request_id=request_id, partitions=partitions):
                # As confluent-kafka: on_assign runs before the data plane gets the partitions,
                # and start offsets it passes to incremental_assign()/assign() are honoured.
                overrides: dict[tuple[str, int], int] = {}
                self._tell_rebalance("assigned", partitions)
                self.assign_overrides = overrides
                finish = functools.partial(self._assigned, request_id, overrides)
                try:
                    self._invoke(self.callbacks.on_assign, partitions, finish)
                except BaseException:
                    self.assign_overrides = None
                    raise
            case InvokeOnLost(request_id=request_id, partitions=partitions):
                # As confluent-kafka: without on_lost, lost partitions go to on_revoke.
                callback = self.callbacks.on_lost or self.callbacks.on_revoke
                self.dataplane.unassign((tp.topic, tp.partition) for tp in partitions)
                # Lost partitions are no longer ours even inside on_lost: committing them would
                # be refused by the broker, so commit() refuses it first.
                self.owned.difference_update(partitions)
                self.start_offsets.forget(partitions)
                self._forget_stopped(partitions)
                finish = functools.partial(self._lost, request_id, partitions)
                self._invoke(callback, partitions, finish)
            case ReportError():
                self._report(event)
            case ReportCommitResult():
                self._deliver_commit_result(event)
            case StateChanged(previous=previous, current=current):
                if self.callbacks.on_state_change is not None:
                    self._guarded(self.callbacks.on_state_change, previous.name, current.name)
            case StateTransition():
                self._tell(event)
            case RuntimeFailed(error=error):
                self._fail(error)
            case ShutDown():
                self.shut_down = True
            case _:
                raise AssertionError(f"unexpected background event {event!r}")

    def _revoked(
        self, request_id: int, partitions: tuple[TopicPartition, ...], error: str | None
    ) -> None:
        self._forget_stopped(partitions)
        self.owned.difference_update(partitions)
        self._tell_rebalance("revoked", partitions)
        self.to_background.put(RevocationCompleted(request_id, error))

    def _assigned(
        self, request_id: int, overrides: dict[tuple[str, int], int], error: str | None
    ) -> None:
        self.assign_overrides = None
        starts = self._finish_apply(overrides)
        self.to_background.put(CallbackCompleted(request_id, error))
        self._start_fetching(starts)

    def _lost(
        self, request_id: int, partitions: tuple[TopicPartition, ...], error: str | None
    ) -> None:
        self._tell_rebalance("lost", partitions)
        self.to_background.put(CallbackCompleted(request_id, error))

    def _deliver_commit_result(self, result: ReportCommitResult) -> None:
        waiter = self.commit_waiters.pop(result.token, None)
        if waiter is not None:
            waiter.on_result(result)
            waiter.done.set()

    def _fail(self, error: BaseException) -> None:
        self.fatal_error = kafka_exception(
            KafkaError._FATAL, f"the consumer's background loop died: {error!r}", fatal=True
        )

    def _invoke(
        self,
        callback: RebalanceCallback | None,
        partitions: Iterable[TopicPartition],
        finish: CallbackFinish,
    ) -> None:
        """Run ``callback``, then ``finish`` with its error; park it if it returns an
        awaitable (``consumer.aio``), which then calls :meth:`finish_parked`."""
        if callback is None:
            finish(None)
            return
        kafka_partitions = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        self.in_callback = True
        try:
            result: object = callback(self.consumer, kafka_partitions)
        except Exception as exc:  # noqa: BLE001 - re-raised from poll(), as in Java
            self.in_callback = False
            self._pending_errors.append(exc)
            finish(f"{type(exc).__name__}: {exc}")
            return
        except BaseException:
            self.in_callback = False
            raise
        if inspect.isawaitable(result):
            self.parked = ParkedCallback(result, finish)
            return
        self.in_callback = False
        finish(None)

    def _tell_rebalance(self, kind: RebalanceKind, partitions: Iterable[TopicPartition]) -> None:
        """Tell the member listeners (if any) about a rebalance callback moment."""
        if not self.callbacks.member_listeners:
            return
        pairs = tuple(sorted((tp.topic, tp.partition) for tp in partitions))
        member_id = self.consumer.memberid() or ""
        epoch = self.consumer.member_epoch
        self._tell(RebalanceEvent(kind, pairs, member_id, epoch, self.clock_ms()))

    def _tell(self, event: MemberEvent) -> None:
        for listener in tuple(self.callbacks.member_listeners):
            self._guarded(listener, event)

    def _guarded(self, function: Callable[..., object], *args: object) -> None:
        try:
            function(*args)
        except Exception as exc:  # noqa: BLE001
            self._pending_errors.append(exc)

    def _report(self, report: ReportError) -> None:
        code = report.error_code if report.error_code is not None else KafkaError._FAIL
        message = f"{report.error_name}: {report.message}"
        if report.fatal:
            self.fatal_error = kafka_exception(code, message, fatal=True)
        elif (event := error_event(report, self.poll_overrun)) is not None:
            self._error_events.append(event)  # returned by poll(), as confluent-kafka does
        elif self.callbacks.error_cb is not None:
            self._guarded(self.callbacks.error_cb, KafkaError(code, message))
        else:
            (self.callbacks.logger or _log).warning("consumer group error: %s", message)
