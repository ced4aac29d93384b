"""Errors raised by :class:`consumer.Consumer`.

Like every exception of this package they are ``confluent_kafka.KafkaException`` (through
:class:`~consumer.errors.ConsumerError`), so code written for ``confluent_kafka.Consumer``
(``except KafkaException as e: e.args[0].code()``) keeps working after the one-import switch.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from consumer.errors import ConsumerError


class ConsumerKafkaException(ConsumerError):
    """A failure of the consumer with a librdkafka or broker code; ``args[0]`` is a
    ``confluent_kafka.KafkaError`` (``str()`` is ``NAME: reason``)."""

    def __str__(self) -> str:
        error = self.kafka_error
        return f"{error.name()}: {error.str()}"


def kafka_exception(
    code: int, message: str, *, fatal: bool = False, retriable: bool = False
) -> ConsumerKafkaException:
    """The exception for Kafka error ``code`` (a broker code, or a negative librdkafka one)."""
    return ConsumerKafkaException(KafkaError(code, message, fatal=fatal, retriable=retriable))


class ConsumerClosedError(ConsumerError, RuntimeError):
    """A method was called on a closed consumer (confluent-kafka raises ``RuntimeError``, which
    this is too; its code is ``_STATE``)."""

    kafka_code = KafkaError._STATE


class CallbackMisuseError(ConsumerError, RuntimeError):
    """A method that may not run inside a rebalance callback was called from one (``_STATE``)."""

    kafka_code = KafkaError._STATE
