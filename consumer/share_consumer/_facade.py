"""The :class:`ShareConsumer` class (see :mod:`consumer.share_consumer`)."""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaException,
    Message,
    Messages,
    TopicPartition,
)
from confluent_kafka import KafkaError as ConfluentKafkaError

from consumer._client.settings import cluster_settings
from consumer._share_runtime import (
    Acknowledge,
    AcknowledgementsCompleted,
    Close,
    Commit,
    CommitResult,
    FetchedRecord,
    PartitionFailed,
    RecordSource,
    RuntimeFailed,
    SetSaslCredentials,
    ShareRuntime,
)
from consumer.errors import ConsumerError
from consumer.member.inputs import Unsubscribed
from consumer.share import ShareMemberConfig, Subscribed
from consumer.share.acknowledgements import AcknowledgeType as WireAcknowledgeType
from consumer.share.acknowledgements import TopicIdPartition
from consumer.share_consumer._config import (
    checked_ack_type,
    checked_topics,
    parse_share_config,
)
from consumer.share_consumer._convert import kafka_exception, message_of

__all__ = ["AcknowledgementCommitCallback", "ShareConsumer"]

AcknowledgementCommitCallback = Callable[
    [dict[TopicPartition, set[int]], KafkaException | None], None
]
"""``callback(offsets, exception)``: offsets per partition and their common outcome (None:
applied)."""

_Ack = tuple[TopicIdPartition, int, WireAcknowledgeType, RecordSource]
_CLOSE_BOUND_S: Final = 35.0
#: ``ack_type`` values (ACCEPT, RELEASE, REJECT, RENEW) -> their wire type.
_WIRE_TYPES: Final = {
    int(kind): kind
    for kind in (
        WireAcknowledgeType.ACCEPT,
        WireAcknowledgeType.RELEASE,
        WireAcknowledgeType.REJECT,
        WireAcknowledgeType.RENEW,
    )
}
#: Types whose values may be looked up in ``_WIRE_TYPES`` without :func:`checked_ack_type`.
_PLAIN_ACK_TYPES: Final = frozenset({int, AcknowledgeType})
_WAIT_SLICE_S: Final = 1.0


@dataclass(slots=True)
class _Held:
    """A record the application holds: polled and not yet terminally acknowledged."""

    fetched: FetchedRecord
    lock_deadline_s: float | None
    renewed: bool = False


class ShareConsumer:
    """A share-group consumer (KIP-932); a drop-in for ``confluent_kafka.ShareConsumer``.

    Example (needs a broker)::

        with ShareConsumer({"bootstrap.servers": "localhost:9092", "group.id": "g"}) as c:
            c.subscribe(["orders"])
            for message in c.poll(1.0):
                handle(message)  # ACCEPTed at the next poll (implicit mode)
    """

    def __init__(self, conf: Mapping[str, object]) -> None:
        config = parse_share_config(conf)
        self._explicit = config.acknowledgement_mode == "explicit"
        self._max_records = config.fetch.max_records
        common = config.common
        self._sasl = common.security is not None and common.security.protocol.lower().startswith(
            "sasl_"
        )
        member = ShareMemberConfig(
            group_id=common.group_id,
            rack_id=common.client_rack,
            max_poll_interval_ms=common.max_poll_interval_ms,
            retry_backoff_ms=common.retry_backoff_ms,
            retry_backoff_max_ms=max(common.retry_backoff_ms, common.retry_backoff_max_ms),
        )
        self._runtime = ShareRuntime(cluster_settings(common), member, config.fetch)
        self._subscription: list[str] = []
        self._buffer: collections.deque[FetchedRecord] = collections.deque()
        #: The records polled and not yet terminally acknowledged: (topic, partition, offset).
        self._held: dict[tuple[str, int, int], _Held] = {}
        #: Acknowledgements made since the last poll, sent with the next poll, commit or close.
        self._acks: list[_Ack] = []
        self._callback: AcknowledgementCommitCallback | None = None
        self._in_callback = False
        self._closed = False
        self._runtime.start()

    # --- subscription -------------------------------------------------------------------------

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
        self._runtime.to_background.put(Subscribed(tuple(names)))

    def subscription(self) -> list[str]:
        """The topics subscribed to."""
        self._check_open()
        return list(self._subscription)

    def memberid(self) -> str:
        """The member id this consumer uses in the group and in its share sessions."""
        self._check_not_in_callback()
        return self._runtime.member_id

    def unsubscribe(self) -> None:
        """Leave the group's assignment (the member leaves; records held stay until acked)."""
        self._check_open()
        self._subscription = []
        self._runtime.to_background.put(Unsubscribed())

    # --- consuming ----------------------------------------------------------------------------

    def poll(self, timeout: float = -1) -> Messages:
        """Up to ``max.poll.records`` acquired records, waiting at most ``timeout`` seconds for
        the first (-1: until one arrives); an empty ``Messages`` when none came. Runs the
        acknowledgement commit callback for outcomes that arrived.

        Raises:
            IllegalStateException: closed, not subscribed, inside the commit callback, or
                (explicit mode) records of the previous poll are not acknowledged.
            KafkaException: the background runtime failed, or a partition error to report
                (authorization).
        """
        self._check_open()
        if not self._subscription:
            raise IllegalStateException("Consumer is not subscribed to any topics")
        if self._explicit:
            unacknowledged = sum(1 for held in self._held.values() if not held.renewed)
            if unacknowledged:
                raise IllegalStateException(
                    f"{unacknowledged} records from previous poll have not been acknowledged"
                )
        acks = self._take_acks()
        try:
            if not self._buffer:
                self._take_from_runtime()
        finally:
            # One wake-up of the background loop per poll: the acks, the member's AppPolled,
            # and the fetchers look again (there is room for a delivery).
            self._runtime.to_background.put(Acknowledge(acks, polled=True))
        self._run_callbacks()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while not self._buffer:
            if self._take_from_runtime():
                self._runtime.to_background.put(Acknowledge((), polled=True))  # room again
            else:
                self._run_callbacks()
                remaining = _WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._runtime.to_application.wait(min(remaining, _WAIT_SLICE_S))
        batch: list[Message] = []
        while self._buffer and len(batch) < self._max_records:
            fetched = self._buffer.popleft()
            key = (fetched.topic, fetched.partition.partition, fetched.record.offset)
            self._held[key] = _Held(fetched, fetched.lock_deadline_s)
            batch.append(message_of(fetched))
        return Messages(batch)

    def _take_from_runtime(self) -> bool:
        item = self._runtime.to_application.pop()
        if item is None:
            return False
        if isinstance(item, RuntimeFailed):
            error = item.error
            if isinstance(error, ConsumerError):
                raise kafka_exception(error)
            raise KafkaException(ConfluentKafkaError(ConfluentKafkaError._FAIL, str(error)))
        if isinstance(item, PartitionFailed):
            raise kafka_exception(item.error)
        self._buffer.extend(item)
        return True

    def _send_acks(self) -> None:
        """Hand the acknowledgements made since the last poll to the background (they ride on
        the next fetch to each leader)."""
        acks = self._take_acks()
        if acks:
            self._runtime.to_background.put(Acknowledge(acks))

    def _take_acks(self) -> tuple[_Ack, ...]:
        """The acknowledgements made since the last poll; in implicit mode the ACCEPTs of every
        record of the previous poll (now finished)."""
        if not self._explicit:
            self._acks.extend(
                (held.fetched.partition, offset, WireAcknowledgeType.ACCEPT, held.fetched.source)
                for (_, _, offset), held in self._held.items()
            )
            self._held.clear()
        acks = tuple(self._acks)
        self._acks.clear()
        return acks

    # --- acknowledging ------------------------------------------------------------------------

    def acknowledge(self, message: Message, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: acknowledge ``message`` (sent on the next poll or commit); see
        :meth:`acknowledge_offset`."""
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
        """Explicit mode: acknowledge the record at ``topic``/``partition``/``offset`` with
        ACCEPT, RELEASE or REJECT (``AcknowledgeType``), or RENEW
        (:data:`SHARE_ACKNOWLEDGE_TYPE_RENEW`: the lock is extended and the record stays in
        flight until a terminal type follows; it no longer blocks ``poll``).

        Raises:
            IllegalStateException: implicit mode, closed, inside the commit callback, or the
                record is not in flight (not polled, or already acknowledged).
            TypeError: ``ack_type`` is not an ``AcknowledgeType`` (or int).
            ValueError: an unknown ``ack_type`` or a negative partition or offset.
            KafkaException: RENEW, and the brokers do not serve it (``_UNSUPPORTED_FEATURE``).
        """
        if self._in_callback or self._closed:
            self._check_open()
        if not self._explicit:
            raise IllegalStateException(
                "acknowledge() needs share.acknowledgement.mode=explicit; this consumer "
                "acknowledges implicitly"
            )
        # Runs once per record: a dict look-up for the usual types, the full check otherwise.
        kind = _WIRE_TYPES.get(ack_type) if type(ack_type) in _PLAIN_ACK_TYPES else None
        if kind is None:
            kind = _WIRE_TYPES[checked_ack_type(ack_type)]
        if partition < 0 or offset < 0:
            raise ValueError(f"partition and offset must be >= 0, got {partition} and {offset}")
        key = (topic, partition, offset)
        held = self._held.get(key)
        if held is None:
            raise IllegalStateException(
                f"record {topic}/{partition}@{offset} is not in flight (not from the last poll, "
                "or already acknowledged)"
            )
        if kind is WireAcknowledgeType.RENEW:
            if self._runtime.renew_supported is False:
                raise KafkaException(
                    ConfluentKafkaError(
                        ConfluentKafkaError._UNSUPPORTED_FEATURE,
                        "RENEW needs ShareFetch/ShareAcknowledge v2 (Kafka 4.2 or newer); these "
                        "brokers do not serve it",
                    )
                )
            held.renewed = True
        else:
            del self._held[key]
        fetched = held.fetched
        self._acks.append((fetched.partition, offset, kind, fetched.source))

    def commit_sync(self, timeout: float = 60) -> dict[TopicPartition, KafkaException | None]:
        """Send the pending acknowledgements now and wait (at most ``timeout`` seconds) for
        their outcome per partition (None: applied); empty when nothing was pending. The
        commit callback runs for them (and for earlier outcomes) before this returns."""
        self._check_open()
        commit = Commit(self._take_acks())
        self._runtime.to_background.put(commit)
        try:
            outcome: CommitResult = commit.reply.result(timeout)
        except FutureTimeout:
            raise KafkaException(
                ConfluentKafkaError(
                    ConfluentKafkaError._TIMED_OUT, f"commit_sync: no answer within {timeout} s"
                )
            ) from None
        self._run_callbacks()
        return {
            TopicPartition(topic, partition): None if error is None else kafka_exception(error)
            for (topic, partition), error in outcome.items()
        }

    def commit_async(self) -> None:
        """Send the pending acknowledgements now without waiting; their outcome reaches the
        commit callback at a later ``poll``, commit or ``close``."""
        self._check_open()
        self._runtime.to_background.put(Commit(self._take_acks()))
        self._run_callbacks()

    # --- callbacks, locks, credentials ------------------------------------------------------

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """Call ``callback(offsets, exception)`` with the outcome of acknowledgements:
        ``offsets`` is ``{TopicPartition: set of offsets}``, ``exception`` None when they were
        applied, else the ``KafkaException`` (its ``KafkaError`` code is Kafka's, e.g.
        ``INVALID_RECORD_STATE`` when the lock had expired, ``SHARE_SESSION_NOT_FOUND`` or
        ``_TRANSPORT`` when the share session was lost, ``NOT_LEADER_FOR_PARTITION`` when the
        leader moved). One call per group of acknowledgements with the same outcome, on the
        application thread, during ``poll``, ``commit_sync``, ``commit_async`` and ``close``.
        Consumer methods called from inside it raise ``IllegalStateException``. None removes it.

        Raises:
            TypeError: ``callback`` is neither callable nor None.
        """
        self._check_open()
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        self._callback = callback

    def _run_callbacks(self) -> None:
        outcomes = self._runtime.outcomes
        while outcomes:
            outcome = outcomes.popleft()
            self._apply_renewals(outcome)
            callback = self._callback
            if callback is None:
                continue
            offsets = {
                TopicPartition(topic, partition): set(numbers)
                for (topic, partition), numbers in outcome.offsets.items()
            }
            error = None if outcome.error is None else kafka_exception(outcome.error)
            self._in_callback = True
            try:
                callback(offsets, error)
            finally:
                self._in_callback = False

    def _apply_renewals(self, outcome: AcknowledgementsCompleted) -> None:
        if outcome.lock_deadline_s is None:
            return
        for (topic, partition), offsets in outcome.renewed.items():
            for offset in offsets:
                held = self._held.get((topic, partition, offset))
                if held is not None:
                    held.lock_deadline_s = outcome.lock_deadline_s

    def acquisition_lock_timeout_ms(self) -> int | None:
        """The acquisition lock duration the brokers last announced
        (``AcquisitionLockTimeoutMs``, the group's ``share.record.lock.duration.ms``); None
        before the first fetch answered (Java's ``acquisitionLockTimeoutMs()``)."""
        self._check_open()
        return self._runtime.acquisition_lock_timeout_ms

    def acquisition_lock_deadline(self, message: Message) -> float | None:
        """When the acquisition lock of ``message`` (a record in flight) expires, as a
        ``time.monotonic()`` value: ``deadline - time.monotonic()`` is the time left to
        acknowledge it. Counted from when the fetch (or the RENEW) was sent, so the broker's
        lock lasts at least this long. None when the broker did not say.

        Raises:
            IllegalStateException: the record is not in flight (or closed, or in the callback).
        """
        self._check_open()
        key = (message.topic(), message.partition(), message.offset())
        held = self._held.get(key)  # type: ignore[arg-type]
        if held is None:
            raise IllegalStateException(
                f"record {key[0]}/{key[1]}@{key[2]} is not in flight (not from the last poll, or "
                "already acknowledged)"
            )
        return held.lock_deadline_s

    def metrics(self) -> dict[str, float]:
        """The share member's heartbeat, rebalance, state and acknowledgement metrics (extra).

        A new dict per call, named as :meth:`consumer.Consumer.metrics` names its counterparts;
        the keys are listed in ``docs/howto/metrics.md``.
        """
        return self._runtime.metrics.snapshot(self._runtime.member_epoch)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Authenticate with ``username``/``password`` from now on: new connections (and
        reconnections) of both the coordinator and the share sessions use them; connections
        already authenticated stay open. The password never reaches a log or repr.

        Raises:
            TypeError: a value is not a string.
            ValueError: ``security.protocol`` is not ``sasl_plaintext`` or ``sasl_ssl``.
        """
        self._check_open()
        for name, value in (("username", username), ("password", password)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        if not self._sasl:
            raise ValueError(
                "set_sasl_credentials() needs security.protocol sasl_plaintext or sasl_ssl"
            )
        self._runtime.to_background.put(SetSaslCredentials(username, password))

    # --- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Acknowledge (implicit mode: ACCEPT the last poll's records), close the share sessions
        (releasing what is still held at once) and leave the group; the commit callback runs
        for the last outcomes. Idempotent."""
        self._check_not_in_callback()
        if self._closed:
            return
        self._send_acks()
        closing = Close()
        self._runtime.to_background.put(closing)
        deadline = time.monotonic() + _CLOSE_BOUND_S
        try:
            # Wait for the leave, unless the loop is gone (then nobody will answer).
            while not closing.reply.done() and not self._runtime.finished.is_set():
                if time.monotonic() > deadline:
                    break
                with contextlib.suppress(FutureTimeout):
                    closing.reply.result(_WAIT_SLICE_S)
        finally:
            self._closed = True
            self._runtime.join(_CLOSE_BOUND_S)
            self._held.clear()
            self._run_callbacks()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_not_in_callback(self) -> None:
        if self._in_callback:
            raise IllegalStateException(
                "ShareConsumer methods are not accessible from the acknowledgement commit callback"
            )

    def _check_open(self) -> None:
        self._check_not_in_callback()
        if self._closed:
            raise IllegalStateException("Share consumer closed")
