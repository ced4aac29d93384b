"""Our records and errors as confluent-kafka's ``Message`` and ``KafkaException``."""

from __future__ import annotations

from typing import Final

from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import KafkaException, Message

from consumer._share_runtime import FetchedRecord
from consumer.errors import BrokerError, ConsumerError, KafkaConnectionError, KafkaTimeoutError

__all__ = ["kafka_exception", "message_of"]

_TIMESTAMP_TYPES: Final = {0: 1, 1: 2}  # wire CREATE_TIME/LOG_APPEND_TIME -> confluent's


def kafka_exception(error: ConsumerError) -> KafkaException:
    """``error`` as a ``KafkaException``: a broker error keeps Kafka's code (confluent's
    ``BrokerError`` codes are Kafka's), a lost connection is ``_TRANSPORT``, a timeout
    ``_TIMED_OUT``, anything else ``_FAIL``."""
    if isinstance(error, BrokerError):
        code = error.code
    elif isinstance(error, KafkaConnectionError):
        code = ConfluentKafkaError._TRANSPORT
    elif isinstance(error, KafkaTimeoutError):
        code = ConfluentKafkaError._TIMED_OUT
    else:
        code = ConfluentKafkaError._FAIL
    return KafkaException(ConfluentKafkaError(code, str(error)))


def message_of(fetched: FetchedRecord) -> Message:
    """The ``confluent_kafka.Message`` for an acquired record."""
    record = fetched.record
    # Positional arguments (topic, partition, offset, key, value, headers, error, timestamp,
    # latency, leader_epoch, delivery_count): several times cheaper than keywords, and this
    # runs once per record. Latency -1.0 and leader epoch -1 read back as None, as unset.
    return Message(
        fetched.topic,
        fetched.partition.partition,
        record.offset,
        record.key,
        record.value,
        list(record.headers) if record.headers else None,
        None,
        (_TIMESTAMP_TYPES[record.timestamp_type], record.timestamp_ms),
        -1.0,
        -1,
        fetched.delivery_count,
    )
