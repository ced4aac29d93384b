"""One exception root: everything this package raises on purpose is a ``ConsumerError``."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from kio.schema.errors import ErrorCode

import consumer
import consumer.errors
from consumer import BrokerError, ConfigError, ConsumerError, parse_config
from consumer.errors import KafkaConnectionError, KafkaTimeoutError, error_for_code
from consumer.member import MemberConfig
from consumer.member.errors import (
    FatalMemberError,
    MemberConfigError,
    MemberError,
    MemberStateError,
)

PACKAGE = Path(consumer.__file__).parent


@pytest.mark.parametrize(
    "cls",
    [ConfigError, MemberError, MemberConfigError, MemberStateError, FatalMemberError, BrokerError],
)
def test_every_error_family_hangs_below_the_root(cls: type[Exception]) -> None:
    assert issubclass(cls, ConsumerError)


def test_the_spark_hosts_closed_error_is_a_consumer_error() -> None:
    from consumer.spark._host import MemberClosedError

    assert issubclass(MemberClosedError, ConsumerError)
    assert issubclass(MemberClosedError, RuntimeError)


def test_config_error_is_still_a_value_error() -> None:
    with pytest.raises(ValueError, match="group.id") as info:
        parse_config({"bootstrap.servers": "b:9092"})
    assert isinstance(info.value, ConfigError)
    assert isinstance(info.value, ConsumerError)


def test_member_config_errors_are_consumer_errors() -> None:
    with pytest.raises(ConsumerError, match="group_id"):
        MemberConfig(group_id="")


def test_fatal_member_error_is_a_consumer_error_with_its_code() -> None:
    error = FatalMemberError(30, "GROUP_AUTHORIZATION_FAILED", "denied")
    assert isinstance(error, ConsumerError)
    assert str(error) == "member is fatally failed with GROUP_AUTHORIZATION_FAILED (30): denied"


def test_the_root_module_depends_on_no_layer_of_the_package() -> None:
    """The member core imports ``consumer.errors``: it must stay free of runtime, client, wire
    and Spark imports (the standard library, kio and confluent-kafka's error types only)."""
    tree = ast.parse(Path(consumer.errors.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not {name for name in imported if name.split(".")[0] == "consumer"}


# --- confluent-kafka's KafkaException at the root --------------------------------------------


def test_every_error_is_a_kafka_exception_carrying_a_kafka_error() -> None:
    assert issubclass(ConsumerError, KafkaException)
    error = KafkaConnectionError("broker 1 refused the connection")
    assert isinstance(error.args[0], KafkaError)
    assert (error.args[0].code(), error.args[0].str()) == (
        KafkaError._TRANSPORT,
        "broker 1 refused the connection",
    )
    assert str(error) == "broker 1 refused the connection"


def test_a_broker_error_carries_the_brokers_code_and_retriable_flag() -> None:
    error = error_for_code(int(ErrorCode.not_coordinator), "moved")
    assert isinstance(error, BrokerError)
    assert isinstance(error, KafkaException)
    carried = error.args[0]
    assert (carried.code(), carried.name()) == (KafkaError.NOT_COORDINATOR, "NOT_COORDINATOR")
    assert carried.retriable()
    assert not carried.fatal()
    assert carried.str() == str(error) == error.message
    assert error_for_code(int(ErrorCode.group_authorization_failed)).args[0].retriable() is False


def test_copies_and_pickles_keep_the_class_code_and_message() -> None:
    for original in (
        error_for_code(int(ErrorCode.fenced_member_epoch), "epoch 3 is fenced"),
        KafkaTimeoutError("no answer in 5 s"),
    ):
        for copy in (type(original)(*original.args), pickle.loads(pickle.dumps(original))):
            assert type(copy) is type(original)
            assert copy.args[0].code() == original.args[0].code()
            assert str(copy) == str(original)


def test_a_nul_byte_in_a_message_is_kept_and_shown_escaped_in_the_kafka_error() -> None:
    error = error_for_code(int(ErrorCode.sasl_authentication_failed), "bad \x00alice")
    assert "\x00alice" in str(error)
    assert "\\x00alice" in error.args[0].str()


def test_config_errors_have_invalid_arg() -> None:
    with pytest.raises(KafkaException) as info:
        parse_config({"bootstrap.servers": "b:9092"})
    assert info.value.args[0].code() == KafkaError._INVALID_ARG


def test_a_fatal_member_error_carries_the_brokers_code_as_fatal() -> None:
    carried = FatalMemberError(30, "GROUP_AUTHORIZATION_FAILED", "denied").args[0]
    assert (carried.code(), carried.fatal()) == (KafkaError.GROUP_AUTHORIZATION_FAILED, True)
    assert MemberStateError("x").args[0].code() == KafkaError._STATE
    assert MemberConfigError("x").args[0].code() == KafkaError._INVALID_ARG
