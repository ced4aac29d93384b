"""``consumer.ShareConsumer``: a KIP-932 share-group consumer shaped like
``confluent_kafka.ShareConsumer`` (confluent-kafka-python 2.16, Preview).

The group side is :class:`consumer.share.ShareMember`; the data plane is ours too (ShareFetch and
ShareAcknowledge through share sessions, :mod:`consumer._share_runtime`), so no librdkafka consumer
is involved. ``poll`` returns a ``confluent_kafka.Messages`` sequence of ``confluent_kafka.Message``
objects; each message's ``delivery_count()`` is the broker's delivery count (1 on the first
delivery, 2 after one RELEASE or lock expiry, ...).

Acknowledgement modes (``share.acknowledgement.mode``):

* ``implicit`` (default): every record of the previous ``poll`` is ACCEPTed at the next ``poll``,
  ``commit_sync``, ``commit_async`` or ``close``; ``acknowledge`` raises ``IllegalStateException``.
* ``explicit``: each record must be acknowledged with ``acknowledge`` or ``acknowledge_offset``
  (ACCEPT, RELEASE or REJECT) before the next ``poll``, which raises ``IllegalStateException``
  otherwise.

Acknowledgements ride on the next ShareFetch to the partition's leader; ``commit_sync`` and
``commit_async`` send them at once (ShareAcknowledge); ``close`` sends the last ones on the closing
request of each share session, which also releases every record still held, then leaves the
group. The consumer is not thread-safe (as confluent's).
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal

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
    Close,
    Commit,
    CommitResult,
    FetchedRecord,
    RuntimeFailed,
    ShareRuntime,
)
from consumer.config import ConfigError, ConsumerConfig, parse_config
from consumer.errors import ConsumerError
from consumer.member.inputs import Unsubscribed
from consumer.share import AppPolled, ShareMemberConfig, Subscribed
from consumer.share.acknowledgements import AcknowledgeType as WireAcknowledgeType
from consumer.share.acknowledgements import TopicIdPartition
from consumer.share.fetch_parameters import ShareFetchParameters

# AcknowledgeType is confluent-kafka's own (re-exported by consumer, not part of our __all__).
__all__ = ["ShareConsumer", "parse_share_config"]

AckMode = Literal["implicit", "explicit"]
#: Keys only a share consumer takes; removed before the common keys are checked.
SHARE_KEYS: Final = ("share.acknowledgement.mode", "max.poll.records", "share.acquire.mode")
_MODES: Final = ("implicit", "explicit")
_CLOSE_BOUND_S: Final = 35.0
_WAIT_SLICE_S: Final = 1.0
_TIMESTAMP_TYPES: Final = {0: 1, 1: 2}  # wire CREATE_TIME/LOG_APPEND_TIME -> confluent's


@dataclass(frozen=True)
class ShareConsumerConfig:
    """A share consumer's validated configuration."""

    common: ConsumerConfig
    acknowledgement_mode: AckMode
    fetch: ShareFetchParameters


def parse_share_config(conf: Mapping[str, object]) -> ShareConsumerConfig:
    """Check a ``confluent_kafka.ShareConsumer`` config dict.

    The common keys (``bootstrap.servers``, ``group.id``, ``client.id``, security, timeouts) are
    checked exactly as for :class:`consumer.Consumer`; ``share.acknowledgement.mode`` must be
    ``implicit`` or ``explicit``; ``max.poll.records`` (default 500) and ``share.acquire.mode``
    are checked by :meth:`ShareFetchParameters.from_config`.

    Raises:
        ConfigError: naming the key, the value given and what is allowed.
    """
    if not isinstance(conf, Mapping):
        raise ConfigError(
            f"The configuration must be a dict of configuration keys, not {type(conf).__name__}."
        )
    common = {key: value for key, value in conf.items() if key not in SHARE_KEYS}
    mode = str(conf.get("share.acknowledgement.mode", "implicit")).strip().lower()
    if mode not in _MODES:
        raise ConfigError(
            f"Invalid value {conf['share.acknowledgement.mode']!r} for "
            "'share.acknowledgement.mode': expected 'implicit' or 'explicit'."
        )
    fetch_keys: dict[str, object] = {
        key: conf[key] for key in ("max.poll.records", "share.acquire.mode") if key in conf
    }
    for key in ("fetch.min.bytes", "fetch.max.bytes"):
        if key in conf:
            fetch_keys[key] = conf[key]
    if "fetch.wait.max.ms" in conf:
        fetch_keys["fetch.max.wait.ms"] = conf["fetch.wait.max.ms"]
    try:
        fetch = ShareFetchParameters.from_config(fetch_keys)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    mode_value: AckMode = "explicit" if mode == "explicit" else "implicit"
    return ShareConsumerConfig(parse_config(common), mode_value, fetch)


def _to_kafka_exception(error: ConsumerError) -> KafkaException:
    code = getattr(error, "code", None)
    return KafkaException(
        ConfluentKafkaError(
            code if isinstance(code, int) else ConfluentKafkaError._FAIL, str(error)
        )
    )


def _message(fetched: FetchedRecord) -> Message:
    record = fetched.record
    return Message(
        topic=fetched.topic,
        partition=fetched.partition.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        headers=list(record.headers) or None,
        timestamp=(_TIMESTAMP_TYPES.get(int(record.timestamp_type), 1), record.timestamp_ms),
        delivery_count=fetched.delivery_count,
    )


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
        #: The records of the last poll not yet acknowledged: (topic, partition, offset) -> id.
        self._in_flight: dict[tuple[str, int, int], TopicIdPartition] = {}
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
        if isinstance(topics, str) or not isinstance(topics, Sequence):
            raise TypeError(f"topics must be a list of topic names, got {type(topics).__name__}")
        names = list(topics)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"topic names must be strings, got {name!r}")
            if not name:
                raise ValueError("topic names must be non-empty")
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate topic names: {', '.join(duplicates)}")
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
        return self._runtime.member_id

    def unsubscribe(self) -> None:
        """Leave the group's assignment (the member leaves; records held stay until acked)."""
        self._check_open()
        self._subscription = []
        self._runtime.to_background.put(Unsubscribed())

    # --- consuming ----------------------------------------------------------------------------

    def poll(self, timeout: float = -1) -> Messages:
        """Up to ``max.poll.records`` acquired records, waiting at most ``timeout`` seconds for
        the first (-1: until one arrives); an empty ``Messages`` when none came.

        Raises:
            IllegalStateException: closed, not subscribed, or (explicit mode) records of the
                previous poll are not acknowledged.
            KafkaException: the background runtime failed.
        """
        self._check_open()
        if not self._subscription:
            raise IllegalStateException("Consumer is not subscribed to any topics")
        if self._explicit and self._in_flight:
            raise IllegalStateException(
                f"{len(self._in_flight)} records from previous poll have not been acknowledged"
            )
        self._accept_previous()
        self._runtime.to_background.put(AppPolled())
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while not self._buffer:
            if not self._take_from_runtime():
                remaining = _WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._runtime.to_application.wait(min(remaining, _WAIT_SLICE_S))
        batch: list[Message] = []
        while self._buffer and len(batch) < self._max_records:
            fetched = self._buffer.popleft()
            key = (fetched.topic, fetched.partition.partition, fetched.record.offset)
            self._in_flight[key] = fetched.partition
            batch.append(_message(fetched))
        return Messages(batch)

    def _take_from_runtime(self) -> bool:
        item = self._runtime.to_application.pop()
        if item is None:
            return False
        if isinstance(item, RuntimeFailed):
            error = item.error
            if isinstance(error, ConsumerError):
                raise _to_kafka_exception(error)
            raise KafkaException(ConfluentKafkaError(ConfluentKafkaError._FAIL, str(error)))
        self._buffer.extend(item)
        self._runtime.to_background.put(AppPolled())  # room again: the fetchers may go on
        return True

    def _accept_previous(self) -> None:
        """Implicit mode: ACCEPT every record of the previous poll."""
        if self._explicit or not self._in_flight:
            return
        acks = tuple(
            (partition, offset, WireAcknowledgeType.ACCEPT)
            for (_, _, offset), partition in self._in_flight.items()
        )
        self._in_flight.clear()
        self._runtime.to_background.put(Acknowledge(acks))

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
        if not isinstance(ack_type, int) or isinstance(ack_type, bool):
            raise TypeError(f"ack_type must be an AcknowledgeType, got {type(ack_type).__name__}")
        if ack_type not in (1, 2, 3):
            raise ValueError(
                f"ack_type must be ACCEPT (1), RELEASE (2) or REJECT (3), got {ack_type}"
            )
        if partition < 0 or offset < 0:
            raise ValueError(f"partition and offset must be >= 0, got {partition} and {offset}")
        tip = self._in_flight.pop((topic, partition, offset), None)
        if tip is None:
            raise IllegalStateException(
                f"record {topic}/{partition}@{offset} is not in flight (not from the last poll, "
                "or already acknowledged)"
            )
        self._runtime.to_background.put(
            Acknowledge(((tip, offset, WireAcknowledgeType(int(ack_type))),))
        )

    def commit_sync(self, timeout: float = 60) -> dict[TopicPartition, KafkaException | None]:
        """Send the pending acknowledgements now and wait (at most ``timeout`` seconds) for
        their outcome per partition (None: applied); empty when nothing was pending."""
        self._check_open()
        self._accept_previous()
        commit = Commit()
        self._runtime.to_background.put(commit)
        try:
            outcome: CommitResult = commit.reply.result(timeout)
        except FutureTimeout:
            raise KafkaException(
                ConfluentKafkaError(
                    ConfluentKafkaError._TIMED_OUT, f"commit_sync: no answer within {timeout} s"
                )
            ) from None
        return {
            TopicPartition(topic, partition): None if error is None else _to_kafka_exception(error)
            for (topic, partition), error in outcome.items()
        }

    def commit_async(self) -> None:
        """Send the pending acknowledgements now without waiting."""
        self._check_open()
        self._accept_previous()
        self._runtime.to_background.put(Commit())

    # --- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Acknowledge (implicit mode: ACCEPT the last poll's records), close the share sessions
        (releasing what is still held at once) and leave the group. Idempotent."""
        if self._closed:
            return
        self._accept_previous()
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

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateException("Share consumer closed")

    # --- not offered ----------------------------------------------------------------------------

    def set_acknowledgement_commit_callback(self, callback: Any) -> None:
        """Not implemented yet."""
        raise NotImplementedError("ShareConsumer.set_acknowledgement_commit_callback")

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Not implemented yet."""
        raise NotImplementedError("ShareConsumer.set_sasl_credentials")
