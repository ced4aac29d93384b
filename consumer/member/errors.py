"""The only exceptions the member core raises.

``handle()`` and ``poll()`` never raise anything else: protocol problems reported by the broker
travel as :class:`~consumer.member.commands.ReportError` commands; these exceptions are for misuse
of the core by its caller (an input that makes no sense) and for calls on a member that is already
fatally failed.

They hang below :class:`~consumer.errors.ConsumerError`, the root of every exception of this
package, and so ``confluent_kafka.KafkaException``.
"""

from __future__ import annotations

from consumer.errors import ConsumerError


class MemberError(ConsumerError):
    """Base class of every error raised by :mod:`consumer.member`."""


class MemberConfigError(MemberError):
    """A :class:`~consumer.member.config.MemberConfig` or subscription value is invalid
    (``_INVALID_ARG``)."""

    kafka_code = (
        -186
    )  # confluent_kafka.KafkaError._INVALID_ARG (the core imports no confluent_kafka)


class MemberStateError(MemberError):
    """An input is not allowed in the member's current state (the caller broke the protocol;
    ``_STATE``)."""

    kafka_code = -172  # confluent_kafka.KafkaError._STATE


class FatalMemberError(MemberError):
    """The member is in FATAL state because the broker returned a non-retriable error; its
    ``KafkaError`` (``args[0]``) has the broker's code and ``fatal()`` true.

    Attributes:
        error_code: the Kafka error code (for example 30 for GROUP_AUTHORIZATION_FAILED).
        error_name: the Kafka error name.
        error_message: the message the broker sent, if any.
    """

    def __init__(self, error_code: int, error_name: str, error_message: str | None = None) -> None:
        self.error_code = error_code
        self.error_name = error_name
        self.error_message = error_message
        detail = f": {error_message}" if error_message else ""
        super().__init__(
            f"member is fatally failed with {error_name} ({error_code}){detail}",
            code=error_code,
            fatal=True,
        )
