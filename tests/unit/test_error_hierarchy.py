"""One exception root: everything this package raises on purpose is a ``ConsumerError``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import consumer
import consumer.errors
from consumer import ConfigError, ConsumerError, KafkaError, parse_config
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
    [ConfigError, MemberError, MemberConfigError, MemberStateError, FatalMemberError, KafkaError],
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
    and Spark imports (kio and the standard library only)."""
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
