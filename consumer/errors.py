"""Exceptions raised by the consumer SDK.

Everything derives from :class:`ConsumerError`, which is a ``confluent_kafka.KafkaException``:
``except KafkaException as e`` catches every error of this SDK, and ``e.args[0]`` is a
``confluent_kafka.KafkaError`` whose ``code()`` is the broker's code (or librdkafka's negative
code for a client-side failure), exactly as with confluent-kafka. Two branches hang below it:

* :class:`BrokerError` -- an error code sent by a broker (named ``KafkaError`` up to 0.1.0; that
  name now means confluent-kafka's error *value*, as in confluent-kafka). Every code in kio's
  :class:`~kio.schema.errors.ErrorCode` maps to a class (see :func:`error_for_code`) whose
  ``retriable`` flag is kio's. Codes this project acts on have named classes, grouped in families
  (:class:`RetriableError`, :class:`CoordinatorError`, :class:`MemberFencedError`,
  :class:`FatalGroupError`, :class:`AuthorizationError`); the remaining codes get a generated
  class, reachable through :data:`ERROR_CLASSES` and :func:`error_for_code`.
* client-side failures: :class:`KafkaConnectionError`, :class:`KafkaTimeoutError`,
  :class:`ProtocolError` and :class:`UnsupportedBrokerError`.

Two more branches live next to the code that raises them: :class:`consumer.config.ConfigError`
(also a ``ValueError``) and :class:`consumer.member.errors.MemberError` (misuse of the member
core). This module imports only the standard library, kio and confluent-kafka's two error types,
so every layer may import it.
Code names come from kio alone (:func:`kafka_error_name`).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from confluent_kafka import KafkaError, KafkaException
from kio.schema.errors import ErrorCode

__all__ = [
    "ERROR_CLASSES",
    "AuthorizationError",
    "BrokerError",
    "ConsumerError",
    "CoordinatorError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "FatalGroupError",
    "FencedInstanceIdError",
    "FencedMemberEpochError",
    "GroupAuthorizationFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "IllegalGenerationError",
    "InvalidGroupIdError",
    "InvalidRegularExpressionError",
    "InvalidRequestError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "MemberFencedError",
    "NetworkExceptionError",
    "NotCoordinatorError",
    "OffsetMetadataTooLargeError",
    "ProtocolError",
    "RebalanceInProgressError",
    "RequestTimedOutError",
    "RetriableError",
    "StaleMemberEpochError",
    "TopicAuthorizationFailedError",
    "UnknownMemberIdError",
    "UnknownServerError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedBrokerError",
    "UnsupportedVersionError",
    "error_for_code",
    "error_or_none",
    "kafka_error_name",
]


class ConsumerError(KafkaException):
    """Root of every exception this SDK raises on purpose.

    A ``confluent_kafka.KafkaException``: ``args[0]`` (also :attr:`kafka_error`) is a
    ``confluent_kafka.KafkaError`` with the error's code (:attr:`kafka_code` of the class unless
    a broker sent one), the message as its ``str()``, and ``retriable()``; ``str(exc)`` is the
    message. Built from a message, or from a ``KafkaError`` (how copies are made).
    """

    kafka_code: ClassVar[int] = KafkaError._FAIL
    """The ``confluent_kafka.KafkaError`` code of the class (librdkafka's local codes)."""

    def __init__(
        self, message: object = None, *, code: int | None = None, fatal: bool = False
    ) -> None:
        """``code`` overrides the class's :attr:`kafka_code` (e.g. a broker code the error
        carries); ``fatal`` sets ``KafkaError.fatal()`` (the client cannot go on)."""
        if isinstance(message, KafkaError):
            error = message
        else:
            reason = None if message is None or message == "" else _reason(str(message))
            error = KafkaError(self.kafka_code if code is None else code, reason, fatal=fatal)
        super().__init__(error)

    @property
    def kafka_error(self) -> KafkaError:
        """The ``confluent_kafka.KafkaError`` this exception carries (``args[0]``)."""
        error = self.args[0]
        assert isinstance(error, KafkaError)
        return error

    def __str__(self) -> str:
        return str(self.kafka_error.str())


def _reason(text: str) -> str:
    """``text`` as a ``KafkaError`` reason (a C string: a NUL byte is shown escaped)."""
    return text.replace("\x00", "\\x00")


# --------------------------------------------------------------------------------------------
# Client-side errors
# --------------------------------------------------------------------------------------------


class KafkaConnectionError(ConsumerError):
    """A broker could not be reached, refused the connection, or the connection was closed
    (``_TRANSPORT``)."""

    kafka_code = KafkaError._TRANSPORT


class KafkaTimeoutError(ConsumerError):
    """An operation did not complete within its time budget (connect, request, lookup;
    ``_TIMED_OUT``)."""

    kafka_code = KafkaError._TIMED_OUT


class ProtocolError(ConsumerError):
    """The peer sent bytes that are not a valid Kafka response (is it really a Kafka broker?
    ``_BAD_MSG``)."""

    kafka_code = KafkaError._BAD_MSG


class UnsupportedBrokerError(ConsumerError):
    """The broker lacks an API or an API version this SDK needs (for example no KIP-848;
    ``_UNSUPPORTED_FEATURE``)."""

    kafka_code = KafkaError._UNSUPPORTED_FEATURE


# --------------------------------------------------------------------------------------------
# Broker error codes
# --------------------------------------------------------------------------------------------


class BrokerError(ConsumerError):
    """An error code returned by a Kafka broker.

    Named ``KafkaError`` up to 0.1.0: ``consumer.KafkaError`` is now confluent-kafka's error value,
    as in confluent-kafka. Replace ``except consumer.KafkaError`` with ``except BrokerError`` (or
    with ``except KafkaException`` and ``e.args[0].code()``, which works for confluent-kafka too);
    the attributes below are unchanged. ``args[0]`` is a ``confluent_kafka.KafkaError`` with the
    broker's code, the message and kio's ``retriable`` flag.

    Attributes:
        code: the numeric Kafka error code.
        name: the upper-case Kafka name of the code, e.g. ``FENCED_MEMBER_EPOCH``.
        retriable: whether Kafka classifies the error as retriable (from kio).
        broker_message: the error message the broker sent along, if any.
        message: the full human-readable text (also ``str(error)``).
    """

    error_code: ClassVar[ErrorCode | None] = None
    """The kio code a concrete subclass stands for; None on the family classes."""
    hint: ClassVar[str] = ""
    """What a user can do about the error; appended to the message."""

    def __init_subclass__(
        cls, *, code: ErrorCode | None = None, hint: str | None = None, **kwargs: Any
    ) -> None:
        """``class X(BrokerError, code=ErrorCode.x)`` makes ``X`` the class of code ``x``; its
        hint is ``hint`` or else its docstring (on one line)."""
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.error_code = code
            cls.hint = " ".join((cls.__doc__ or "").split()) if hint is None else hint
            _CLASS_OF_CODE.setdefault(code, cls)

    code: int
    name: str
    retriable: bool
    broker_message: str | None
    message: str

    def __init__(
        self, broker_message: str | KafkaError | None = None, *, code: int | None = None
    ) -> None:
        rendered: str | None = None
        if isinstance(broker_message, KafkaError):  # a copy: type(error)(*error.args)
            code, rendered, broker_message = broker_message.code(), broker_message.str(), None
        kio_code = type(self).error_code
        if code is None:
            if kio_code is None:
                raise TypeError(f"{type(self).__name__} needs an explicit error code")
            code = int(kio_code)
        self.code = code
        known = _known_code(code)
        self.name = kafka_error_name(code) or f"UNKNOWN_ERROR_CODE_{code}"
        self.retriable = known.retriable if known is not None else False
        self.broker_message = broker_message
        self.message = self._render(known) if rendered is None else rendered
        super().__init__(KafkaError(code, _reason(self.message), retriable=self.retriable))

    def __str__(self) -> str:
        return self.message

    def _render(self, known: ErrorCode | None) -> str:
        if self.broker_message:
            detail = self.broker_message
        elif known is not None:
            detail = _kio_descriptions().get(known.name, "")
        else:
            detail = "this error code is not known to this client version"
        text = f"{self.name} ({self.code})"
        if detail:
            text += f": {detail.rstrip('.')}."
        if self.hint:
            text += f" {self.hint}"
        return text

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_kafka_error, (self.code, self.broker_message))


def _rebuild_kafka_error(code: int, broker_message: str | None) -> BrokerError:
    return error_for_code(code, broker_message)


def _known_code(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(code)
    except ValueError:
        return None


def kafka_error_name(code: int) -> str | None:
    """The upper-case Kafka name of ``code`` (kio's name, e.g. ``FENCED_MEMBER_EPOCH``), or None
    for a code kio does not know. The one place codes get their names."""
    known = _known_code(code)
    return None if known is None else known.name.upper()


#: The class of each code, filled by ``BrokerError.__init_subclass__`` (named classes first).
_CLASS_OF_CODE: dict[ErrorCode, type[BrokerError]] = {}


class RetriableError(BrokerError):
    """A transient broker error: the same request may succeed if sent again after a backoff."""


class CoordinatorError(RetriableError):
    """The group coordinator moved, is unknown, or is still loading: find it again and retry."""


class MemberFencedError(BrokerError):
    """The coordinator no longer accepts this member's id or epoch.

    The member must give up its partitions (as lost) and rejoin with epoch 0.
    """


class FatalGroupError(BrokerError):
    """A non-retriable group error: membership cannot continue without a change by the user."""


class AuthorizationError(BrokerError):
    """The principal is not allowed to perform the operation (check the broker's ACLs)."""


# Named classes for the codes this project acts on (each docstring is its hint) ------------


class NotCoordinatorError(CoordinatorError, code=ErrorCode.not_coordinator):
    """Look up the group coordinator again and retry there."""


class CoordinatorNotAvailableError(CoordinatorError, code=ErrorCode.coordinator_not_available):
    """Look up the group coordinator again and retry after a backoff."""


class CoordinatorLoadInProgressError(CoordinatorError, code=ErrorCode.coordinator_load_in_progress):
    """The coordinator is loading the group; retry after a backoff."""


class RequestTimedOutError(RetriableError, code=ErrorCode.request_timed_out):
    """Retry after a backoff."""


class NetworkExceptionError(RetriableError, code=ErrorCode.network_exception):
    """Retry after a backoff."""


class UnknownTopicOrPartitionError(RetriableError, code=ErrorCode.unknown_topic_or_partition):
    """Check the topic name; a newly created topic may take a moment to propagate."""


class UnknownTopicIdError(RetriableError, code=ErrorCode.unknown_topic_id):
    """Refresh metadata; the topic may have been deleted or recreated."""


class UnstableOffsetCommitError(RetriableError, code=ErrorCode.unstable_offset_commit):
    """A transactional commit is pending; retry the offset fetch after a backoff."""


class FencedMemberEpochError(MemberFencedError, code=ErrorCode.fenced_member_epoch):
    """Rejoin with epoch 0 and the same member id."""


class UnknownMemberIdError(MemberFencedError, code=ErrorCode.unknown_member_id):
    """The member must release its partitions as lost and rejoin with epoch 0."""


class StaleMemberEpochError(BrokerError, code=ErrorCode.stale_member_epoch):
    """The member epoch used for the commit or fetch is not current; retry with the newest epoch."""


class IllegalGenerationError(BrokerError, code=ErrorCode.illegal_generation):
    """The generation or epoch used is not current; rejoin the group."""


class RebalanceInProgressError(BrokerError, code=ErrorCode.rebalance_in_progress):
    """The group is rebalancing; retry once the member has its new assignment."""


class GroupMaxSizeReachedError(FatalGroupError, code=ErrorCode.group_max_size_reached):
    """The group is full; raise group.consumer.max.size on the broker or use fewer members."""


class UnreleasedInstanceIdError(FatalGroupError, code=ErrorCode.unreleased_instance_id):
    """The static member with this group.instance.id has not left yet; wait or pick another id."""


class FencedInstanceIdError(FatalGroupError, code=ErrorCode.fenced_instance_id):
    """Another process joined with the same group.instance.id; give each member its own id."""


class UnsupportedAssignorError(FatalGroupError, code=ErrorCode.unsupported_assignor):
    """Set group.remote.assignor to one listed in the broker's group.consumer.assignors."""


class InvalidRegularExpressionError(FatalGroupError, code=ErrorCode.invalid_regular_expression):
    """Fix the subscription pattern; the broker evaluates it with RE2/J syntax."""


class GroupIdNotFoundError(FatalGroupError, code=ErrorCode.group_id_not_found):
    """The group does not exist (any more) on the coordinator."""


class InvalidGroupIdError(FatalGroupError, code=ErrorCode.invalid_group_id):
    """Use a non-empty group.id."""


class InvalidRequestError(FatalGroupError, code=ErrorCode.invalid_request):
    """The broker rejected the request as malformed; this is likely a bug in this client."""


class UnsupportedVersionError(FatalGroupError, code=ErrorCode.unsupported_version):
    """The broker does not support this request version; the consumer group protocol needs Apache
    Kafka 4.0+ (use group.protocol=classic for older clusters).
    """


class OffsetMetadataTooLargeError(BrokerError, code=ErrorCode.offset_metadata_too_large):
    """Shorten the commit metadata string (broker offset.metadata.max.bytes)."""


class UnknownServerError(BrokerError, code=ErrorCode.unknown_server_error):
    """Check the broker logs."""


class GroupAuthorizationFailedError(AuthorizationError, code=ErrorCode.group_authorization_failed):
    """Grant the principal READ on the group resource."""


class TopicAuthorizationFailedError(AuthorizationError, code=ErrorCode.topic_authorization_failed):
    """Grant the principal DESCRIBE/READ on the subscribed topics."""


# Generated classes for every other code ------------------------------------------------------


def _class_name_for(code: ErrorCode) -> str:
    camel = "".join(part.capitalize() for part in code.name.split("_"))
    return camel if camel.endswith(("Error", "Exception")) else f"{camel}Error"


def _family_for(code: ErrorCode) -> type[BrokerError]:
    if code.name.endswith("_authorization_failed"):
        return AuthorizationError
    return RetriableError if code.retriable else BrokerError


def _generated_class(code: ErrorCode) -> type[BrokerError]:
    namespace: dict[str, object] = {
        "__module__": __name__,
        "__doc__": f"Kafka error {code.name.upper()} ({int(code)}).",
    }
    return type(_class_name_for(code), (_family_for(code),), namespace, code=code, hint="")


def _build_registry() -> Mapping[ErrorCode, type[BrokerError]]:
    for code in ErrorCode:
        if code is not ErrorCode.none and code not in _CLASS_OF_CODE:
            _generated_class(code)
    return MappingProxyType(dict(_CLASS_OF_CODE))


ERROR_CLASSES: Mapping[ErrorCode, type[BrokerError]] = _build_registry()
"""The exception class of every error code kio knows (``ErrorCode.none`` excluded)."""


def error_for_code(code: int, message: str | None = None) -> BrokerError:
    """Return the exception for a non-zero Kafka error code, carrying the broker's message.

    Codes kio does not know (from a newer broker) give a plain, non-retriable
    :class:`BrokerError`.

    Raises:
        ValueError: if ``code`` is 0 (``NONE`` is not an error).
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    known = _known_code(code)
    if known is None:
        return BrokerError(message, code=code)
    return ERROR_CLASSES[known](message)


def error_or_none(code: int, message: str | None = None) -> BrokerError | None:
    """Like :func:`error_for_code`, but returns None for code 0."""
    return None if code == 0 else error_for_code(code, message)


@functools.cache
def _kio_descriptions() -> Mapping[str, str]:
    """The one-line description kio documents for each code, read from its source once."""
    spec = importlib.util.find_spec("kio.schema.errors")
    if spec is None or spec.origin is None:
        return {}
    try:
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    descriptions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ErrorCode":
            body = node.body
            for statement, following in zip(body, body[1:], strict=False):
                if (
                    isinstance(statement, ast.Assign)
                    and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)
                    and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    descriptions[statement.targets[0].id] = following.value.value.strip()
    return descriptions
