"""Our records and errors as confluent-kafka's ``Message`` and ``KafkaException``."""

from __future__ import annotations

from typing import Final

from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import KafkaException, Message

from consumer._share_runtime import FetchedRecord
from consumer.errors import ConsumerError, KafkaConnectionError, KafkaError, KafkaTimeoutError

__all__ = ["kafka_exception", "message_of"]

_TIMESTAMP_TYPES: Final = {0: 1, 1: 2}  # wire CREATE_TIME/LOG_APPEND_TIME -> confluent's


def kafka_exception(error: ConsumerError) -> KafkaException:
    """``error`` as a ``KafkaException``: a broker error keeps Kafka's code (confluent's
    ``KafkaError`` codes are Kafka's), a lost connection is ``_TRANSPORT``, a timeout
    ``_TIMED_OUT``, anything else ``_FAIL``."""
    if isinstance(error, KafkaError):
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
