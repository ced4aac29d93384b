"""``FakeShareConsumer``: the :class:`consumer.ShareConsumer` API on a :class:`ShareSimCluster`.

Behind it is the real :class:`~consumer.share.ShareMember` (the same group brain as the real share
consumer), driven on the simulated clock against a simulated share coordinator, and simulated
share-partitions that keep each record's state, delivery count and lock as the broker does. Records
are real ``confluent_kafka.Message`` objects in a ``confluent_kafka.Messages`` sequence, with
``delivery_count()``.

The rules are the real consumer's: the same configuration checks; in ``implicit`` mode the records
of the previous ``poll`` are ACCEPTed at the next ``poll``, ``commit_sync``, ``commit_async`` or
``close`` and ``acknowledge`` raises ``IllegalStateException``; in ``explicit`` mode each record
must be acknowledged before the next ``poll``. Acknowledgements are sent on the next ``poll``
(piggybacked on the fetch) or commit; their outcome per partition goes to the acknowledgement
commit callback, which runs on the caller's thread inside ``poll``, ``commit_sync``,
``commit_async`` (outcomes of earlier calls) or ``close`` (an ACCEPT that arrives after the
record's lock expired fails with INVALID_RECORD_STATE, and the record is delivered again).
``close`` releases every record still held at once, then leaves.

``poll(timeout)`` moves the simulated clock (never the wall clock) until records are acquired or
``timeout`` has passed, so ``poll(1.0)`` returns at once. Time spent processing is simulated by
calling :meth:`ShareSimCluster.advance` from the processing code.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaError,
    KafkaException,
    Message,
    Messages,
    TopicPartition,
)

from consumer.member.inputs import Unsubscribed
from consumer.member.partitions import TopicPartition as NamedPartition
from consumer.share import AppPolled, CloseRequested, ShareMemberConfig, Subscribed
from consumer.share.acknowledgements import AcknowledgeType as WireAcknowledgeType
from consumer.share_consumer import parse_share_config
from consumer.share_consumer._config import checked_ack_type, checked_topics
from consumer.testing.sim.share_cluster import INFINITE_POLL_LIMIT_MS, ShareSimCluster
from consumer.testing.sim.share_runtime import SimShareRuntime

__all__ = ["AcknowledgementCommitCallback", "FakeShareConsumer"]

#: ``cb(offsets by partition, error or None)``, confluent-kafka's shape.
AcknowledgementCommitCallback = Callable[
    [dict[TopicPartition, set[int]], KafkaException | None], None
]
_BOOTSTRAP: Final = "simulated:9092"
_CLOSE_BOUND_MS: Final = 30_000
_Key = tuple[str, int]


class FakeShareConsumer:
    """A :class:`consumer.ShareConsumer` on a simulated cluster (see the module docstring).

    Build one with :meth:`ShareSimCluster.share_consumer`. ``conf`` is the real share consumer's
    configuration, checked by the same code (``bootstrap.servers`` may be left out).
    """

    def __init__(
        self,
        conf: Mapping[str, object] | None = None,
        /,
        *,
        cluster: ShareSimCluster,
        name: str | None = None,
    ) -> None:
        config = parse_share_config({"bootstrap.servers": _BOOTSTRAP, **(conf or {})})
        common = config.common
        self._cluster = cluster
        self._group_id = common.group_id
        self._explicit = config.acknowledgement_mode == "explicit"
        self._max_records = config.fetch.max_records
        self.name: str = cluster.register(self, name)
        member = ShareMemberConfig(
            group_id=common.group_id,
            rack_id=common.client_rack,
            max_poll_interval_ms=common.max_poll_interval_ms,
            retry_backoff_ms=common.retry_backoff_ms,
            retry_backoff_max_ms=max(common.retry_backoff_ms, common.retry_backoff_max_ms),
        )
        self.runtime = SimShareRuntime(
            member,
            cluster.rng.getrandbits(64),
            cluster.group(common.group_id),
            lambda: cluster.clock.now_ms,
            self._flush,
        )
        self._subscription: list[str] = []
        #: The records of the last poll not yet acknowledged, in delivery order.
        self._in_flight: dict[tuple[str, int, int], None] = {}
        self._pending: dict[_Key, list[tuple[int, WireAcknowledgeType]]] = {}
        self._results: deque[tuple[dict[TopicPartition, set[int]], KafkaException | None]] = deque()
        self._callback: AcknowledgementCommitCallback | None = None
        self._in_callback = False
        self._closed = False
        self._rotation = 0
        self._lock_timeout_ms: int | None = None

    # --- extras beyond confluent-kafka ----------------------------------------------------------

    @property
    def cluster(self) -> ShareSimCluster:
        """The simulated cluster this consumer belongs to."""
        return self._cluster

    def metrics(self) -> dict[str, float]:
        """As :meth:`consumer.ShareConsumer.metrics`, counted on simulated time."""
        return self.runtime.metrics.snapshot(self.runtime.member.member_epoch)

    @property
    def state(self) -> str:
        """The member state: UNSUBSCRIBED, JOINING, RECONCILING, STABLE, FENCED, STALE, ..."""
        return self.runtime.state.name

    @property
    def member_epoch(self) -> int:
        """The member epoch the coordinator gave this member (0 before joining)."""
        return self.runtime.member.member_epoch

    def assignment(self) -> list[TopicPartition]:
        """The partitions this member fetches now (its share of the group's assignment)."""
        return [TopicPartition(tp.topic, tp.partition) for tp in self.runtime.fetching]

    def crash(self, *, connections_closed: bool = True) -> None:
        """Die at once: no acknowledgement, no leave heartbeat (the member is removed when its
        session times out). A killed process's connections close, and the broker then releases
        its records at once (Kafka 4.1+, KAFKA-19015; seen on 4.3); ``connections_closed=False``
        is a host that vanished: its records stay locked until their locks expire."""
        self.runtime.crash()
        self._closed = True
        if connections_closed:
            shares = self._cluster.share_partitions(self._group_id)
            shares.release_member(self.memberid(), self._now_ms())

    def drop_heartbeats(self, duration_ms: int) -> None:
        """Lose every heartbeat for ``duration_ms`` (fetching and acknowledging go on, as
        KIP-932 does not fence the data plane); past the session timeout the member is removed,
        and rejoins when its heartbeats get through again (UNKNOWN_MEMBER_ID)."""
        if duration_ms < 0:
            raise ValueError(f"duration_ms must be >= 0, got {duration_ms}")
        self.runtime.heartbeats_dropped_until_ms = self._now_ms() + duration_ms

    @property
    def closed(self) -> bool:
        """True after ``close()`` or :meth:`crash`."""
        return self._closed

    # --- subscription ---------------------------------------------------------------------------

    def subscribe(self, topics: Sequence[str]) -> None:
        """Subscribe to exactly ``topics`` (replacing the subscription); ``[]`` unsubscribes.

        Raises:
            TypeError: ``topics`` is not a list of strings.
            ValueError: an empty or duplicate topic name.
        """
        self._check_open()
        names = checked_topics(topics)
        if not names:
            self.unsubscribe()
            return
        self._subscription = names
        self.runtime.submit(Subscribed(tuple(names)))
        self._cluster.run_due()

    def subscription(self) -> list[str]:
        """The topics subscribed to."""
        self._check_open()
        return list(self._subscription)

    def memberid(self) -> str:
        """The member id this consumer uses in the group and in its share sessions."""
        return self.runtime.member.member_id

    def unsubscribe(self) -> None:
        """Leave the group's assignment (the member leaves; records held stay until acked)."""
        self._check_open()
        self._subscription = []
        self.runtime.submit(Unsubscribed())
        self._cluster.run_due()

    # --- consuming ----------------------------------------------------------------------------

    def poll(self, timeout: float = -1) -> Messages:
        """Up to ``max.poll.records`` acquired records, moving the simulated clock at most
        ``timeout`` seconds for the first (-1: up to an hour); an empty ``Messages`` when none.

        Raises:
            IllegalStateException: closed, inside the acknowledgement commit callback, not
                subscribed, or (explicit mode) records of the previous poll are not acknowledged.
            KafkaException: the member failed fatally.
        """
        self._check_open()
        if not self._subscription:
            raise IllegalStateException("Consumer is not subscribed to any topics")
        if self._explicit and self._in_flight:
            raise IllegalStateException(
                f"{len(self._in_flight)} records from previous poll have not been acknowledged"
            )
        self._accept_previous()
        self._raise_failure()
        if timeout is None or timeout < 0:
            deadline_ms = self._now_ms() + INFINITE_POLL_LIMIT_MS
        else:
            deadline_ms = self._now_ms() + int(timeout * 1000)
        self.runtime.submit(AppPolled(polled_at_ms=self._now_ms()))
        while True:
            self._cluster.run_due()
            self._raise_failure()
            self._send_acknowledgements()
            batch = self._acquire()
            now = self._now_ms()
            if batch or now >= deadline_ms or not self._cluster.poll_advances_clock:
                break
            self._cluster.step_towards(deadline_ms)
        self._run_callbacks()
        return Messages(batch)

    def _acquire(self) -> list[Message]:
        partitions = list(self.runtime.fetching)
        if not partitions:
            return []
        start = self._rotation % len(partitions)
        self._rotation += 1
        shares = self._cluster.share_partitions(self._group_id)
        batch: list[Message] = []
        for tp in partitions[start:] + partitions[:start]:
            room = self._max_records - len(batch)
            if room <= 0:
                break
            for record, count in shares.acquire(
                self.memberid(), tp.topic, tp.partition, room, self._now_ms()
            ):
                self._in_flight[(record.topic, record.partition, record.offset)] = None
                batch.append(record.message(count))
        if batch:
            self._lock_timeout_ms = shares.settings.record_lock_duration_ms
        return batch

    def _accept_previous(self) -> None:
        """Implicit mode: ACCEPT every record of the previous poll."""
        if self._explicit or not self._in_flight:
            return
        for topic, partition, offset in self._in_flight:
            self._pending.setdefault((topic, partition), []).append(
                (offset, WireAcknowledgeType.ACCEPT)
            )
        self._in_flight.clear()

    # --- acknowledging ------------------------------------------------------------------------

    def acknowledge(self, message: Message, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: acknowledge ``message`` (sent on the next poll or commit)."""
        if not isinstance(message, Message):
            raise TypeError(
                f"message must be a confluent_kafka.Message, got {type(message).__name__}"
            )
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise ValueError("the message has no topic, partition or offset")
        self.acknowledge_offset(topic, partition, offset, ack_type)

    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, ack_type: int = AcknowledgeType.ACCEPT
    ) -> None:
        """Explicit mode: acknowledge the record at ``topic``/``partition``/``offset``.

        Raises:
            IllegalStateException: implicit mode, closed, or the record is not in flight (not
                from the last poll, or already acknowledged).
            TypeError: ``ack_type`` is not an ``AcknowledgeType`` (or int).
            ValueError: an unknown ``ack_type`` or a negative partition or offset.
        """
        self._check_open()
        if not self._explicit:
            raise IllegalStateException(
                "acknowledge() needs share.acknowledgement.mode=explicit; this consumer "
                "acknowledges implicitly"
            )
        kind = WireAcknowledgeType(checked_ack_type(ack_type))
        if partition < 0 or offset < 0:
            raise ValueError(f"partition and offset must be >= 0, got {partition} and {offset}")
        key = (topic, partition, offset)
        if key not in self._in_flight:
            raise IllegalStateException(
                f"record {topic}/{partition}@{offset} is not in flight (not from the last poll, "
                "or already acknowledged)"
            )
        if kind is not WireAcknowledgeType.RENEW:  # a renewed record stays in flight
            del self._in_flight[key]
        self._pending.setdefault((topic, partition), []).append((offset, kind))

    def acquisition_lock_timeout_ms(self) -> int | None:
        """The group's ``share.record.lock.duration.ms`` once this consumer acquired records
        (None before), as the real consumer reports the broker's ``AcquisitionLockTimeoutMs``."""
        self._check_open()
        return self._lock_timeout_ms

    def acquisition_lock_deadline(self, message: Message) -> float | None:
        """When the lock of ``message`` (a record in flight) expires, in seconds of the
        simulated clock (``cluster.clock.now_ms / 1000`` is now; the real consumer answers in
        ``time.monotonic()`` seconds).

        Raises:
            IllegalStateException: the record is not in flight (or closed, or in the callback).
        """
        self._check_open()
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if (topic, partition, offset) not in self._in_flight or partition is None or offset is None:
            raise IllegalStateException(
                f"record {topic}/{partition}@{offset} is not in flight (not from the last poll, "
                "or already acknowledged)"
            )
        shares = self._cluster.share_partitions(self._group_id)
        deadline_ms = shares.partition(str(topic), partition).lock_deadline_ms(offset)
        return None if deadline_ms is None else deadline_ms / 1000

    def commit_sync(self, timeout: float = 60) -> dict[TopicPartition, KafkaException | None]:
        """Send the pending acknowledgements; their outcome per partition (None: applied)."""
        self._check_open()
        self._accept_previous()
        started_ms = self._now_ms()
        outcome = self._send_acknowledgements()
        self.runtime.metrics.commit_completed(started_ms)
        self._run_callbacks()
        return outcome

    def commit_async(self) -> None:
        """Send the pending acknowledgements now; their outcome goes to the acknowledgement
        commit callback from a later call (earlier outcomes are delivered here)."""
        self._check_open()
        self._run_callbacks()
        self._accept_previous()
        self._send_acknowledgements()

    def set_acknowledgement_commit_callback(self, callback: Any) -> None:
        """Call ``callback(offsets, error)`` with the outcome of each partition's
        acknowledgements (``offsets``: ``{TopicPartition: {offset, ...}}``; ``error``: a
        ``KafkaException`` or None), on the caller's thread inside ``poll``, ``commit_sync``,
        ``commit_async`` or ``close``. ``None`` removes it. Consumer methods called from it raise
        ``IllegalStateException``.
        """
        self._check_open()
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        self._callback = callback

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Accepted and ignored: the simulated cluster has no authentication."""
        self._check_open()
        if not isinstance(username, str) or not isinstance(password, str):
            raise TypeError("username and password must be strings")

    # --- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Acknowledge (implicit mode: ACCEPT the last poll's records), release every record
        still held at once (the share sessions close) and leave the group. Idempotent."""
        if self._closed:
            return
        self._check_not_in_callback()
        try:
            self._accept_previous()
            self._send_acknowledgements()
            self._cluster.share_partitions(self._group_id).release_member(
                self.memberid(), self._now_ms()
            )
            self._in_flight.clear()
            runtime = self.runtime
            runtime.submit(CloseRequested())
            self._cluster.run_until(lambda: runtime.finished, self._now_ms() + _CLOSE_BOUND_MS)
            self._run_callbacks()
        finally:
            self._closed = True

    def __enter__(self) -> FakeShareConsumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- internals ------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return self._cluster.clock.now_ms

    def _flush(self, partitions: Sequence[NamedPartition]) -> None:
        """The member stops fetching ``partitions``: their pending acknowledgements go now."""
        self._send_acknowledgements({(tp.topic, tp.partition) for tp in partitions})

    def _send_acknowledgements(
        self, only: set[_Key] | None = None
    ) -> dict[TopicPartition, KafkaException | None]:
        """Apply the pending acknowledgements (of ``only`` partitions, or all) to the simulated
        share-partitions; queue each partition's outcome for the callback and return them."""
        shares = self._cluster.share_partitions(self._group_id)
        outcome: dict[TopicPartition, KafkaException | None] = {}
        for key in sorted(self._pending):
            if only is not None and key not in only:
                continue
            acks = self._pending.pop(key)
            topic, partition = key
            codes = [
                shares.acknowledge(self.memberid(), topic, partition, o, t, self._now_ms())
                for o, t in acks
            ]
            failed = next((code for code in codes if code is not None), None)
            error = None if failed is None else _acknowledge_error(failed, topic, partition)
            outcome[TopicPartition(topic, partition)] = error
            self._results.append(({TopicPartition(topic, partition): {o for o, _ in acks}}, error))
            offsets = frozenset(o for o, _ in acks)
            self.runtime.metrics.acknowledged({key: offsets}, failed=error is not None)
        return outcome

    def _run_callbacks(self) -> None:
        while self._results:
            offsets, error = self._results.popleft()
            if self._callback is None:
                continue
            self._in_callback = True
            try:
                self._callback(offsets, error)
            finally:
                self._in_callback = False

    def _raise_failure(self) -> None:
        failure = self.runtime.failure
        if failure is not None:
            code = failure.error_code if failure.error_code is not None else KafkaError._FAIL
            raise KafkaException(KafkaError(code, f"{failure.error_name}: {failure.message}"))

    def _check_not_in_callback(self) -> None:
        if self._in_callback:
            raise IllegalStateException(
                "ShareConsumer methods may not be called from the acknowledgement commit callback"
            )

    def _check_open(self) -> None:
        self._check_not_in_callback()
        if self._closed:
            raise IllegalStateException("Share consumer closed")


def _acknowledge_error(code: int, topic: str, partition: int) -> KafkaException:
    return KafkaException(
        KafkaError(
            code,
            f"acknowledgement of {topic}/{partition} failed: the record is not acquired by this "
            "member (its lock expired, or it was acknowledged already)",
        )
    )
