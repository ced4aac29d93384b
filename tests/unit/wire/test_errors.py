"""The exception tree: every kio ErrorCode maps to a class with kio's retriable flag."""

from __future__ import annotations

import pickle

import pytest
from kio.schema.errors import ErrorCode

from consumer import errors
from consumer.errors import (
    ERROR_CLASSES,
    AuthorizationError,
    BrokerError,
    ConsumerError,
    CoordinatorError,
    FatalGroupError,
    MemberFencedError,
    RetriableError,
    error_for_code,
    error_or_none,
)

ALL_ERROR_CODES = [code for code in ErrorCode if code is not ErrorCode.none]


@pytest.mark.parametrize("code", ALL_ERROR_CODES, ids=[c.name for c in ALL_ERROR_CODES])
def test_every_kio_code_has_a_class_with_kios_retriable_flag(code: ErrorCode) -> None:
    error = error_for_code(int(code), "broker says hi")
    assert type(error) is ERROR_CLASSES[code]
    assert error.code == int(code)
    assert error.name == code.name.upper()
    assert error.retriable is code.retriable
    assert isinstance(error, RetriableError) is code.retriable
    assert isinstance(error, BrokerError)
    assert isinstance(error, ConsumerError)
    assert "broker says hi" in str(error)
    assert code.name.upper() in str(error)


def test_registry_is_complete_and_classes_are_distinct() -> None:
    assert set(ERROR_CLASSES) == set(ALL_ERROR_CODES)
    assert len(set(ERROR_CLASSES.values())) == len(ALL_ERROR_CODES)


@pytest.mark.parametrize(
    ("name", "code", "family"),
    [
        ("FencedMemberEpochError", 110, MemberFencedError),
        ("UnknownMemberIdError", 25, MemberFencedError),
        ("StaleMemberEpochError", 113, BrokerError),
        ("NotCoordinatorError", 16, CoordinatorError),
        ("CoordinatorNotAvailableError", 15, CoordinatorError),
        ("CoordinatorLoadInProgressError", 14, CoordinatorError),
        ("GroupAuthorizationFailedError", 30, AuthorizationError),
        ("TopicAuthorizationFailedError", 29, AuthorizationError),
        ("InvalidRequestError", 42, FatalGroupError),
        ("UnsupportedAssignorError", 112, FatalGroupError),
        ("GroupMaxSizeReachedError", 81, FatalGroupError),
        ("UnreleasedInstanceIdError", 111, FatalGroupError),
        ("FencedInstanceIdError", 82, FatalGroupError),
        ("InvalidRegularExpressionError", 128, FatalGroupError),
        ("UnsupportedVersionError", 35, FatalGroupError),
        ("GroupIdNotFoundError", 69, FatalGroupError),
        ("UnknownTopicIdError", 100, RetriableError),
        ("UnknownTopicOrPartitionError", 3, RetriableError),
    ],
)
def test_named_classes_for_codes_we_act_on(name: str, code: int, family: type[BrokerError]) -> None:
    cls = getattr(errors, name)
    assert type(error_for_code(code)) is cls
    assert issubclass(cls, family)
    assert cls().code == code  # a named class needs no code argument


def test_default_message_is_actionable_without_broker_text() -> None:
    text = str(error_for_code(ErrorCode.unsupported_assignor))
    assert text.startswith("UNSUPPORTED_ASSIGNOR (112):")
    assert "group.remote.assignor" in text


def test_generated_class_uses_kio_description() -> None:
    error = error_for_code(ErrorCode.offset_out_of_range)
    assert type(error).__name__ == "OffsetOutOfRangeError"
    assert "not within the range" in str(error)


def test_unknown_code_from_a_newer_broker_is_a_plain_kafka_error() -> None:
    error = error_for_code(9999, "future")
    assert type(error) is BrokerError
    assert (error.code, error.retriable, error.name) == (9999, False, "UNKNOWN_ERROR_CODE_9999")


def test_zero_is_not_an_error() -> None:
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)
    assert error_or_none(0) is None
    assert isinstance(error_or_none(16), CoordinatorError)


def test_family_classes_need_a_code() -> None:
    with pytest.raises(TypeError):
        RetriableError()


def test_errors_pickle_to_the_same_class() -> None:
    for error in (error_for_code(110, "m"), error_for_code(31), error_for_code(4242)):
        restored = pickle.loads(pickle.dumps(error))
        assert type(restored) is type(error)
        assert (restored.code, restored.broker_message, str(restored)) == (
            error.code,
            error.broker_message,
            str(error),
        )


def test_client_side_errors_share_the_root() -> None:
    for cls in (
        errors.KafkaConnectionError,
        errors.KafkaTimeoutError,
        errors.ProtocolError,
        errors.UnsupportedBrokerError,
    ):
        assert issubclass(cls, ConsumerError)
        assert not issubclass(cls, BrokerError)


def test_named_classes_hint_with_their_docstring() -> None:
    named = [cls for cls in set(ERROR_CLASSES.values()) if cls.__module__ == errors.__name__]
    documented = [cls for cls in named if cls.hint]
    assert len(documented) >= 26
    for cls in documented:
        assert cls.__doc__ is not None
        assert cls.hint == " ".join(cls.__doc__.split())
        assert str(cls()).endswith(cls.hint)


def test_generated_classes_have_no_hint_but_a_docstring() -> None:
    cls = ERROR_CLASSES[ErrorCode.sasl_authentication_failed]
    assert cls.hint == ""
    assert cls.__doc__ == "Kafka error SASL_AUTHENTICATION_FAILED (58)."


def test_a_subclass_does_not_take_over_a_codes_class() -> None:
    class Mine(errors.NotCoordinatorError, code=ErrorCode.not_coordinator):
        """Mine."""

    assert ERROR_CLASSES[ErrorCode.not_coordinator] is errors.NotCoordinatorError
    assert type(error_for_code(16)) is errors.NotCoordinatorError
    assert Mine().hint == "Mine."


def test_code_names_come_from_kio() -> None:
    for code in ErrorCode:
        assert errors.kafka_error_name(int(code)) == code.name.upper()
    assert errors.kafka_error_name(9999) is None
