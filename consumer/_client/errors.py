"""Errors raised by :class:`consumer.Consumer`.

They are both our :class:`~consumer.errors.ConsumerError` and ``confluent_kafka.KafkaException``,
so code written for ``confluent_kafka.Consumer`` (``except KafkaException as e:
e.args[0].code()``) keeps working after the one-import switch.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from consumer.errors import ConsumerError


class ConsumerKafkaException(ConsumerError, KafkaException):
    """A failure of the consumer; ``args[0]`` is a ``confluent_kafka.KafkaError``."""

    @property
    def kafka_error(self) -> KafkaError:
        """The ``confluent_kafka.KafkaError`` this exception carries."""
        error = self.args[0]
        assert isinstance(error, KafkaError)
        return error

    def __str__(self) -> str:
        error = self.kafka_error
        return f"{error.name()}: {error.str()}"


def kafka_exception(
    code: int, message: str, *, fatal: bool = False, retriable: bool = False
) -> ConsumerKafkaException:
    """The exception for Kafka error ``code`` (a broker code, or a negative librdkafka one)."""
    return ConsumerKafkaException(KafkaError(code, message, fatal=fatal, retriable=retriable))


class ConsumerClosedError(ConsumerError, RuntimeError):
    """A method was called on a closed consumer (confluent-kafka raises RuntimeError too)."""


class CallbackMisuseError(ConsumerError, RuntimeError):
    """A method that may not run inside a rebalance callback was called from one."""
