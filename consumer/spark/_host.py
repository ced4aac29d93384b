"""A driver-side group member whose partitions Spark reads: :class:`MemberHost`.

The member is our :class:`consumer.Consumer`, run on a dedicated daemon thread that owns it (every
call on the consumer happens on that thread). All partitions are paused as soon as they are
assigned, so the member only keeps membership: heartbeats run on the consumer's background thread,
and Spark executors read the owned ranges with their own assign-mode fetchers.

Revocations are held: ``on_revoke`` returns only when the partition's committed offset has
reached the end of the last range planned for it (``planned_end``), or when the rebalance timeout
is close, or when the host closes. Commits requested from other threads (Spark's ``commit(end)``)
are executed on the member thread, also while it waits inside ``on_revoke``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import TopicPartition

from consumer import Consumer
from consumer._client.librdkafka import LibrdkafkaConsumer, assign_mode_consumer
from consumer.errors import ConsumerError
from consumer.spark._spec import GroupSpec, TopicPartitionKey

_log = logging.getLogger("consumer.spark")
T = TypeVar("T")

#: How long one member-thread poll blocks before requests are served again.
_POLL_S = 0.05


class MemberClosedError(ConsumerError, RuntimeError):
    """The member host is closed (or its member thread died)."""


class MemberHost:
    """One KIP-848 member that holds partitions for Spark (see the module docstring).

    The ownership tables (``owned``, ``revoking``, ``acquired``, ``committed``,
    ``planned_end``) are guarded by ``lock``; planners take it while they decide which
    partitions a batch includes, so a revocation never races a plan.
    """

    def __init__(self, spec: GroupSpec, *, name: str = "kafka-group-spark") -> None:
        self.spec = spec
        self.name = name
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self.owned: set[TopicPartitionKey] = set()
        self.revoking: set[TopicPartitionKey] = set()
        self.acquired: set[TopicPartitionKey] = set()
        self.committed: dict[TopicPartitionKey, int] = {}
        self.planned_end: dict[TopicPartitionKey, int] = {}
        #: (wall-clock time, "assign" | "revoke" | "lost", partition), for diagnostics and tests.
        self.events: list[tuple[float, str, TopicPartitionKey]] = []
        #: Partitions released at the rebalance deadline before their range was committed.
        self.forced_releases: list[TopicPartitionKey] = []
        self.state = "UNSUBSCRIBED"
        self.member_id: str | None = None
        self.member_epoch = 0
        self.error: BaseException | None = None
        hold = spec.rebalance_timeout_s
        self._hold_s = max(0.5, hold - min(5.0, 0.2 * hold))
        self._requests: queue.SimpleQueue[tuple[Callable[[Consumer], Any], Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self._metadata: LibrdkafkaConsumer | None = None
        self._metadata_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> MemberHost:
        """Start the member thread; it subscribes and begins to heartbeat."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s):
            raise TimeoutError(f"the member thread did not start within {timeout_s} s")
        if self.error is not None:
            raise MemberClosedError(f"the member could not start: {self.error!r}") from self.error
        return self

    @property
    def closed(self) -> bool:
        """True once close() was called or the member thread ended."""
        return self._stopping.is_set()

    def close(self, timeout_s: float = 30.0) -> None:
        """Release held revocations, leave the group and stop the member thread (idempotent)."""
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                _log.warning("member thread %s did not stop within %s s", self.name, timeout_s)
        with self._metadata_lock:
            if self._metadata is not None:
                self._metadata.close()
                self._metadata = None

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` (evaluated under ``lock``) holds; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping.is_set():
                    return predicate()
                self._changed.wait(min(remaining, 0.1))
            return True

    def wait_stable(self, timeout_s: float) -> None:
        """Wait until the member is STABLE (joined, assignment reconciled)."""
        if not self.wait_for(lambda: self.state == "STABLE", timeout_s):
            detail = f": {self.error!r}" if self.error is not None else ""
            raise TimeoutError(
                f"member of group {self.spec.group_id!r} not STABLE within {timeout_s} s "
                f"(state {self.state}){detail}"
            )

    # --- offsets ---------------------------------------------------------------------------------

    def watermarks(
        self, keys: Iterable[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, tuple[int, int]]:
        """Low and high watermarks (a separate assign-mode client; failures are left out)."""
        result: dict[TopicPartitionKey, tuple[int, int]] = {}
        with self._metadata_lock:
            if self._metadata is None:
                self._metadata = assign_mode_consumer(self.spec.fetcher_config())
            for topic, partition in keys:
                try:
                    low, high = self._metadata.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=10.0, cached=False
                    )
                except Exception as exc:  # noqa: BLE001 - the partition is skipped this time
                    _log.warning("watermarks of %s[%d]: %s", topic, partition, exc)
                    continue
                result[(topic, partition)] = (int(low), int(high))
        return result

    def plan(
        self, start: Mapping[TopicPartitionKey, int]
    ) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, int]]:
        """Decide the next ranges: ``(end, begin_overrides)`` over owned, unrevoked partitions.

        ``end`` is each partition's high watermark. A partition acquired since the last plan (or
        absent from ``start``) begins at its committed offset (or the reset position), never
        below ``start``; that begin offset is returned in ``begin_overrides`` when it differs
        from ``start``. Every included partition's ``planned_end`` is recorded, so a later
        revocation waits for its commit.
        """
        with self.lock:
            keys = sorted(self.owned - self.revoking)
            marks = self.watermarks(keys)
            end: dict[TopicPartitionKey, int] = {}
            begin: dict[TopicPartitionKey, int] = {}
            for key in keys:
                first = start.get(key)
                if key not in marks:
                    # Unknown watermark: no new data for it in this batch, and a partition
                    # that has no position yet waits (stays acquired) for the next plan.
                    if first is not None and key not in self.acquired:
                        end[key] = first
                        self.planned_end[key] = first
                    continue
                low, high = marks[key]
                if key in self.acquired or first is None:
                    known = self.committed.get(key, -1)
                    reset = low if self.spec.starting_offsets == "earliest" else high
                    base = known if known >= 0 else reset
                    if first is not None:
                        base = max(base, first)
                    if base != first:
                        begin[key] = base
                    first = base
                end[key] = max(high, first)
                self.planned_end[key] = end[key]
            self.acquired.difference_update(end)
            return end, begin

    def commit(
        self, offsets: Mapping[TopicPartitionKey, int], timeout_s: float | None = None
    ) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, str]]:
        """Commit ``offsets`` with the member epoch; returns ``(committed, rejected)``.

        Partitions no longer owned are rejected without a request (another member owns them
        now); offsets not above the known committed offset are skipped (never moved back).
        """
        rejected: dict[TopicPartitionKey, str] = {}
        eligible: dict[TopicPartitionKey, int] = {}
        with self.lock:
            for key, offset in offsets.items():
                if key not in self.owned:
                    rejected[key] = "not owned by this member"
                elif offset > self.committed.get(key, -1):
                    eligible[key] = offset
        if not eligible:
            return {}, rejected
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(eligible.items())]

        def commit_now(consumer: Consumer) -> None:
            consumer.commit(offsets=partitions, asynchronous=False)

        try:
            self.submit(commit_now).result(timeout_s or self.spec.rebalance_timeout_s)
        except Exception as exc:  # noqa: BLE001 - reported per partition to the caller
            _log.warning("commit of %s failed: %s", eligible, exc)
            rejected.update({key: f"{type(exc).__name__}: {exc}" for key in eligible})
            return {}, rejected
        with self._changed:
            for key, offset in eligible.items():
                self.committed[key] = max(offset, self.committed.get(key, -1))
            self._changed.notify_all()
        return eligible, rejected

    def submit(self, function: Callable[[Consumer], T]) -> Future[T]:
        """Run ``function(consumer)`` on the member thread (also while it holds a revocation)."""
        if self._stopping.is_set():
            raise MemberClosedError("the member host is closed")
        future: Future[T] = Future()
        self._requests.put((function, future))
        with self._changed:
            self._changed.notify_all()
        return future

    # --- the member thread -----------------------------------------------------------------------

    def _run(self) -> None:
        consumer: Consumer | None = None
        try:
            consumer = Consumer(self.spec.member_config())
            consumer.subscribe(
                self.spec.subscription,
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._started.set()
            while not self._stopping.is_set():
                try:
                    consumer.poll(_POLL_S)
                except Exception as exc:  # noqa: BLE001 - fatal ones end the member
                    error = exc.args[0] if exc.args else None
                    if getattr(error, "fatal", lambda: False)():
                        raise
                    _log.warning("member %s: %s", self.name, exc)
                self._observe(consumer)
                self._serve(consumer)
        except BaseException as exc:  # noqa: BLE001 - kept for the caller, thread ends
            self.error = exc
            _log.error("member thread %s failed: %r", self.name, exc)
        finally:
            self._stopping.set()
            self._started.set()
            self._fail_requests()
            if consumer is not None:
                try:
                    consumer.close()
                except Exception as exc:  # noqa: BLE001
                    _log.warning("closing member %s: %s", self.name, exc)
            with self._changed:
                self.state = "CLOSED"
                self._changed.notify_all()

    def _observe(self, consumer: Consumer) -> None:
        state, epoch, member_id = consumer.state, consumer.member_epoch, consumer.memberid()
        if (state, epoch, member_id) != (self.state, self.member_epoch, self.member_id):
            with self._changed:
                self.state, self.member_epoch, self.member_id = state, epoch, member_id
                self._changed.notify_all()

    def _serve(self, consumer: Consumer) -> None:
        while True:
            try:
                function, future = self._requests.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(consumer))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                future.set_exception(exc)

    def _fail_requests(self) -> None:
        while True:
            try:
                _, future = self._requests.get_nowait()
            except queue.Empty:
                return
            if future.set_running_or_notify_cancel():
                future.set_exception(MemberClosedError("the member host closed"))

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        with self._changed:
            self.events.extend((time.time(), "assign", key) for key in keys)
        consumer.pause(partitions)
        committed = self._committed(consumer, keys)
        with self._changed:
            for tp in committed:
                self.committed[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else -1
            for key in keys:
                self.planned_end.pop(key, None)
            self.owned.update(keys)
            self.acquired.update(keys)
            self._changed.notify_all()

    def _committed(self, consumer: Consumer, keys: list[TopicPartitionKey]) -> list[TopicPartition]:
        """The group's committed offsets (OffsetFetch with our epoch), retried a few times."""
        wanted = [TopicPartition(t, p) for t, p in keys]
        for attempt in range(3):
            try:
                return consumer.committed(wanted, timeout=15.0)
            except Exception as exc:  # noqa: BLE001 - retried, then raised into poll()
                if attempt == 2:
                    raise
                _log.warning("committed offsets of %s: %s; retrying", keys, exc)
        raise AssertionError("unreachable")

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        with self._changed:
            self.revoking.update(keys)
            self._changed.notify_all()
        deadline = time.monotonic() + self._hold_s
        try:
            while not self._stopping.is_set():
                with self._changed:
                    pending = [k for k in keys if self._uncommitted(k)]
                if not pending:
                    break
                if time.monotonic() >= deadline:
                    _log.warning(
                        "releasing %s at the rebalance deadline before their commit: the next "
                        "owner re-reads their last range (at-least-once)",
                        pending,
                    )
                    self.forced_releases.extend(pending)
                    break
                self._serve(consumer)
                with self._changed:
                    if self._requests.empty():
                        self._changed.wait(0.05)
        finally:
            self._drop(keys, "revoke")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drop([(tp.topic, tp.partition) for tp in partitions], "lost")

    def _uncommitted(self, key: TopicPartitionKey) -> bool:
        planned = self.planned_end.get(key)
        return planned is not None and self.committed.get(key, -1) < planned

    def _drop(self, keys: list[TopicPartitionKey], event: str) -> None:
        with self._changed:
            now = time.time()
            for key in keys:
                self.owned.discard(key)
                self.revoking.discard(key)
                self.acquired.discard(key)
                self.planned_end.pop(key, None)
                self.committed.pop(key, None)
                self.events.append((now, event, key))
            self._changed.notify_all()
