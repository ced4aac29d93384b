"""``group.protocol=classic``: librdkafka's classic-protocol consumer behind ``consumer.Consumer``.

``Consumer({... "group.protocol": "classic"})`` returns a :class:`ClassicConsumer` (a
``Consumer``), chosen once at construction. It is a thin layer over ``confluent_kafka.Consumer``
(JoinGroup/SyncGroup/Heartbeat, client-side assignors): the configuration is checked by the same
key table (classic-only keys such as ``partition.assignment.strategy`` are accepted here only),
every call is passed through, and errors are librdkafka's own ``KafkaException``. What differs,
as the Java client keeps every API under ``group.protocol=classic``:

* rebalance callbacks receive this object, as confluent-kafka passes its own consumer;
* ``member_epoch`` is the classic generation (-1 outside a generation) and ``state`` is coarse:
  ``UNSUBSCRIBED``, ``JOINING`` (no generation yet) or ``STABLE`` (librdkafka exposes no more);
* ``metrics()`` counts what passes through this layer (partitions assigned, revoked and lost,
  owned now, the generation); librdkafka's own group statistics are in ``stats_cb``'s ``cgrp``;
* ``close(group_membership=...)``: librdkafka leaves the group on close for a dynamic member and
  keeps a static member's seat, which are ``DEFAULT``, ``LEAVE_GROUP`` for a dynamic member and
  ``REMAIN_IN_GROUP`` for a static one; the other two combinations and member listeners raise
  ``_NOT_IMPLEMENTED``. ``timeout`` is checked but librdkafka's close cannot be bounded.
"""

from __future__ import annotations

import struct
from typing import Any

from confluent_kafka import KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.member_events import MemberListener
from consumer._client.app_thread import RebalanceCallback
from consumer._client.closing import close_budget_s, close_option
from consumer._client.consumer import Consumer
from consumer._client.errors import ConsumerClosedError, kafka_exception
from consumer._client.group_metadata import NO_MEMBER_EPOCH
from consumer._client.librdkafka import LibrdkafkaConsumer, classic_consumer
from consumer._client.settings import check_callbacks, subscription_event
from consumer.config import ConfigError, ConsumerConfig, parse_config
from consumer.member import CloseOption

__all__ = ["ClassicConsumer", "classic_class"]

#: Where the generation sits in librdkafka's consumer group metadata ("CGMDv2:" + int32).
_GENERATION = struct.Struct("=i")
_GENERATION_AT = len(b"CGMDv2:")


class ClassicConsumer(Consumer):
    """``consumer.Consumer`` with ``group.protocol=classic``: librdkafka's classic member.

    Built by ``Consumer(config)``; every public method of :class:`Consumer` is overridden here
    (a unit test checks it), none of the KIP-848 member's machinery runs.
    """

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._config: ConsumerConfig = parse_config({**(config or {}), **kwargs})
        self._classic: LibrdkafkaConsumer = classic_consumer(self._config.data_plane)
        self._closed = False
        self._subscribed = False
        self._counts = {"assigned": 0, "revoked": 0, "lost": 0}

    # --- extras beyond confluent-kafka ----------------------------------------------------------

    @property
    def state(self) -> str:
        """``UNSUBSCRIBED``, ``JOINING`` (no generation yet) or ``STABLE`` (coarse, see above)."""
        if not self._subscribed or self._closed:
            return "UNSUBSCRIBED"
        return "JOINING" if self.member_epoch < 0 else "STABLE"

    @property
    def member_epoch(self) -> int:
        """The classic generation id of this member (-1 outside a generation)."""
        if self._closed:
            return NO_MEMBER_EPOCH
        metadata = self._classic.consumer_group_metadata()
        if not isinstance(metadata, bytes) or len(metadata) < _GENERATION_AT + _GENERATION.size:
            return NO_MEMBER_EPOCH
        generation: int = _GENERATION.unpack_from(metadata, _GENERATION_AT)[0]
        return generation

    def metrics(self) -> dict[str, float]:
        """What this layer counts: partitions assigned, revoked and lost, owned now, the
        generation (librdkafka's own group statistics come with ``stats_cb``)."""
        owned = 0 if self._closed else len(self._classic.assignment())
        return {
            "partitions-assigned-total": self._counts["assigned"],
            "partitions-revoked-total": self._counts["revoked"],
            "partitions-lost-total": self._counts["lost"],
            "assigned-partitions": owned,
            "member-epoch": self.member_epoch,
        }

    def add_member_listener(self, listener: MemberListener) -> None:
        """Not with ``group.protocol=classic``: raises ``_NOT_IMPLEMENTED``."""
        self._check_open()
        raise kafka_exception(
            KafkaError._NOT_IMPLEMENTED,
            "member listeners report the consumer-protocol member's states and rebalances; "
            "group.protocol=classic has none to report (use on_assign/on_revoke/on_lost)",
        )

    def remove_member_listener(self, listener: MemberListener) -> None:
        """Raises ``ValueError``: no listener can be added under ``group.protocol=classic``."""
        raise ValueError(f"{listener!r} is not a member listener of this consumer")

    # --- subscription ---------------------------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe as ``confluent_kafka.Consumer.subscribe``; callbacks get this object."""
        self._check_open()
        subscription_event(topics)  # the same checks and errors as group.protocol=consumer
        check_callbacks(on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

        def assigned(_: object, partitions: list[KafkaTopicPartition]) -> None:
            self._counts["assigned"] += len(partitions)
            if on_assign is not None:
                on_assign(self, partitions)

        def revoked(_: object, partitions: list[KafkaTopicPartition]) -> None:
            self._counts["revoked"] += len(partitions)
            if on_revoke is not None:
                on_revoke(self, partitions)

        def lost(_: object, partitions: list[KafkaTopicPartition]) -> None:
            self._counts["lost"] += len(partitions)
            # confluent-kafka's rule: without on_lost, lost partitions go to on_revoke.
            callback = on_lost if on_lost is not None else on_revoke
            if callback is not None:
                callback(self, partitions)

        self._classic.subscribe(list(topics), on_assign=assigned, on_revoke=revoked, on_lost=lost)
        self._subscribed = True

    def unsubscribe(self) -> None:
        """Leave the group, as ``confluent_kafka.Consumer.unsubscribe``."""
        self._check_open()
        self._classic.unsubscribe()
        self._subscribed = False

    # --- records --------------------------------------------------------------------------------

    def poll(self, timeout: float | None = -1) -> Message | None:
        """One record or event (rebalance callbacks run inside), or None on timeout."""
        self._check_open()
        message: Message | None = self._classic.poll(_seconds(timeout))
        return message

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` records."""
        self._check_open()
        messages: list[Message] = self._classic.consume(num_messages, _seconds(timeout))
        return messages

    # --- offsets --------------------------------------------------------------------------------

    def commit(
        self,
        message: Message | None = None,
        offsets: list[KafkaTopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[KafkaTopicPartition] | None:
        """Commit as ``confluent_kafka.Consumer.commit`` (with the classic generation)."""
        self._check_open()
        given: dict[str, Any] = {"message": message, "offsets": offsets}
        arguments = {name: value for name, value in given.items() if value is not None}
        commit: Any = self._classic.commit  # its stubs list the keyword combinations one by one
        result: list[KafkaTopicPartition] | None = commit(asynchronous=asynchronous, **arguments)
        return result

    def store_offsets(
        self, message: Message | None = None, offsets: list[KafkaTopicPartition] | None = None
    ) -> None:
        """Store offsets for the next commit (needs ``enable.auto.offset.store=false``)."""
        self._check_open()
        given: dict[str, Any] = {"message": message, "offsets": offsets}
        self._classic.store_offsets(**{k: v for k, v in given.items() if v is not None})

    def committed(
        self, partitions: list[KafkaTopicPartition], timeout: float | None = -1
    ) -> list[KafkaTopicPartition]:
        """The committed offsets of ``partitions``."""
        self._check_open()
        result: list[KafkaTopicPartition] = self._classic.committed(
            partitions, timeout=_seconds(timeout)
        )
        return result

    def position(self, partitions: list[KafkaTopicPartition]) -> list[KafkaTopicPartition]:
        """The offset of the next record to return, per partition."""
        self._check_open()
        result: list[KafkaTopicPartition] = self._classic.position(partitions)
        return result

    def assignment(self) -> list[KafkaTopicPartition]:
        """The current assignment."""
        self._check_open()
        result: list[KafkaTopicPartition] = self._classic.assignment()
        return result

    # --- assignment ---------------------------------------------------------------------------

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """As ``confluent_kafka.Consumer.incremental_assign``."""
        self._check_open()
        self._classic.incremental_assign(partitions)

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """As ``confluent_kafka.Consumer.assign``."""
        self._check_open()
        self._classic.assign(partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        """As ``confluent_kafka.Consumer.incremental_unassign``."""
        self._check_open()
        self._classic.incremental_unassign(partitions)

    def unassign(self) -> None:
        """As ``confluent_kafka.Consumer.unassign``."""
        self._check_open()
        self._classic.unassign()

    def memberid(self) -> str | None:
        """The member id the group coordinator gave this member, or None."""
        self._check_open()
        member_id: str | None = self._classic.memberid()
        return member_id

    def consumer_group_metadata(self) -> bytes:
        """librdkafka's group metadata (generation, member id) for transactional commits."""
        self._check_open()
        metadata: bytes = self._classic.consumer_group_metadata()
        return metadata

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Authenticate connections opened from now on with ``username``/``password``."""
        self._check_open()
        self._classic.set_sasl_credentials(username, password)

    # --- the data plane's calls -----------------------------------------------------------------

    def pause(self, partitions: list[KafkaTopicPartition]) -> None:
        """Stop returning records of these partitions until ``resume()``."""
        self._check_open()
        self._classic.pause(partitions)

    def resume(self, partitions: list[KafkaTopicPartition]) -> None:
        """Resume paused partitions."""
        self._check_open()
        self._classic.resume(partitions)

    def seek(self, partition: KafkaTopicPartition) -> None:
        """Move the fetch position of an assigned partition."""
        self._check_open()
        self._classic.seek(partition)

    def get_watermark_offsets(
        self, partition: KafkaTopicPartition, timeout: float | None = -1, cached: bool = False
    ) -> tuple[int, int] | None:
        """Low and high watermark offsets of a partition."""
        self._check_open()
        result: tuple[int, int] | None = self._classic.get_watermark_offsets(
            partition, timeout=_seconds(timeout), cached=cached
        )
        return result

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The cluster id."""
        self._check_open()
        cluster_id: str | None = self._classic.cluster_id(timeout)
        return cluster_id

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Cluster metadata."""
        self._check_open()
        return self._classic.list_topics(topic, timeout=timeout)

    def offsets_for_times(
        self, partitions: list[KafkaTopicPartition], timeout: float = -1
    ) -> list[KafkaTopicPartition]:
        """Earliest offsets whose timestamps are at or after the given ones."""
        self._check_open()
        result: list[KafkaTopicPartition] = self._classic.offsets_for_times(
            partitions, timeout=timeout
        )
        return result

    # --- close ----------------------------------------------------------------------------------

    def close(
        self,
        *,
        group_membership: CloseOption | str = CloseOption.DEFAULT,
        timeout: float | None = None,
    ) -> None:
        """Commit (with auto-commit), run on_revoke and leave the group as librdkafka does.

        ``group_membership``: ``DEFAULT``, ``LEAVE_GROUP`` (dynamic members) and
        ``REMAIN_IN_GROUP`` (static members) are what librdkafka does; others raise
        ``_NOT_IMPLEMENTED``. ``timeout`` is checked, not enforced (librdkafka's close is not
        bounded).
        """
        if self._closed:
            return
        option = close_option(group_membership)
        close_budget_s(timeout, self._config.max_poll_interval_ms)
        static = self._config.group_instance_id is not None
        unsupported = CloseOption.REMAIN_IN_GROUP if not static else CloseOption.LEAVE_GROUP
        if option is unsupported:
            kind = "a static" if static else "a dynamic"
            raise kafka_exception(
                KafkaError._NOT_IMPLEMENTED,
                f"close(group_membership={option.value!r}) is not available for {kind} member "
                "with group.protocol=classic: librdkafka's classic consumer always "
                + ("keeps a static member's seat" if static else "leaves the group on close"),
            )
        try:
            self._classic.close()  # runs on_revoke, which may still use this consumer
        finally:
            self._closed = True
            self._subscribed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")


def classic_class(cls: type[Consumer]) -> type[ClassicConsumer]:
    """The class ``cls(config)`` is built as when ``config`` asks for ``group.protocol=classic``.

    A subclass of ``Consumer`` (not of ``ClassicConsumer``) would silently run the KIP-848 member
    instead, so it is refused.
    """
    if issubclass(cls, ClassicConsumer):
        return cls
    if cls is Consumer:
        return ClassicConsumer
    raise ConfigError(
        f"Invalid value 'classic' for 'group.protocol': {cls.__name__} subclasses "
        "consumer.Consumer and runs the consumer protocol only; expected 'consumer' (the "
        "default), or build consumer.Consumer itself for group.protocol=classic."
    )


def _seconds(timeout: float | None) -> float:
    """confluent-kafka's timeout argument: ``None`` and negative values mean "wait forever"."""
    return -1 if timeout is None else timeout
