"""``group.protocol=classic``: which keys each protocol accepts, the messages, and what the
librdkafka classic consumer is given (no broker: construction only)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from consumer import Consumer
from consumer._client.classic import ClassicConsumer
from consumer._config.spec import CLASSIC_ONLY
from consumer.config import ConfigError, parse_config, wants_classic

BASE: dict[str, object] = {"bootstrap.servers": "127.0.0.1:1", "group.id": "orders"}
CLASSIC: dict[str, object] = {**BASE, "group.protocol": "classic"}


def refused(config: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(config)
    assert isinstance(info.value, KafkaException)
    assert info.value.args[0].code() == KafkaError._INVALID_ARG
    return str(info.value)


@pytest.mark.parametrize("spelling", ["classic", "Classic", " CLASSIC "])
def test_classic_is_accepted_in_any_case(spelling: str) -> None:
    assert parse_config({**BASE, "group.protocol": spelling}).group_protocol == "classic"
    assert wants_classic({**BASE, "group.protocol": spelling})


@pytest.mark.parametrize("config", [BASE, {**BASE, "group.protocol": "consumer"}, [], None])
def test_anything_else_is_not_classic(config: Any) -> None:
    assert not wants_classic(config)


@pytest.mark.parametrize(
    ("key", "value", "checked"),
    [
        ("session.timeout.ms", "6000", 6000),
        ("heartbeat.interval.ms", 500, 500),
        ("partition.assignment.strategy", "Cooperative-Sticky", "cooperative-sticky"),
        ("partition.assignment.strategy", "range, roundrobin", "range,roundrobin"),
        ("group.protocol.type", "consumer", "consumer"),
    ],
)
def test_classic_only_keys_are_accepted_with_classic_and_forwarded_checked(
    key: str, value: object, checked: object
) -> None:
    settings = parse_config({**CLASSIC, key: value}).data_plane
    assert settings[key] == checked


@pytest.mark.parametrize("key", sorted(CLASSIC_ONLY))
def test_classic_only_keys_are_refused_under_consumer_whatever_the_value(key: str) -> None:
    message = refused({**BASE, "group.protocol": "consumer", key: "not even valid"})
    assert message.startswith(f"'{key}' is a classic-protocol setting")
    assert "group.protocol=consumer" in message
    assert "or set group.protocol=classic" in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("session.timeout.ms", 6000),
        ("heartbeat.interval.ms", "3000"),
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("group.protocol.type", "consumer"),
    ],
)
def test_classic_only_keys_without_a_protocol_are_ignored_not_forwarded(
    key: str, value: object
) -> None:
    # librdkafka's default protocol is classic, ours is consumer: a program written for
    # confluent-kafka that tunes its classic session must still run when only its import changes.
    config = parse_config({**BASE, key: value})
    assert config.group_protocol == "consumer"
    assert config.ignored_classic_keys == (key,)
    assert key not in config.data_plane


def test_classic_only_keys_without_a_protocol_still_need_valid_values() -> None:
    message = refused({**BASE, "session.timeout.ms": 0})
    assert "'session.timeout.ms'" in message
    assert "an integer in 1..3600000" in message


def test_no_classic_only_key_means_nothing_ignored() -> None:
    assert parse_config(BASE).ignored_classic_keys == ()
    assert parse_config({**CLASSIC, "session.timeout.ms": 6000}).ignored_classic_keys == ()


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("session.timeout.ms", 0, "an integer in 1..3600000"),
        ("heartbeat.interval.ms", "3s", "an integer in 1..3600000"),
        ("partition.assignment.strategy", "sticky", "range, roundrobin, cooperative-sticky"),
        ("group.protocol.type", "", "a non-empty string"),
    ],
)
def test_bad_classic_values_name_the_key_and_what_is_allowed(
    key: str, value: object, allowed: str
) -> None:
    message = refused({**CLASSIC, key: value})
    assert message.startswith(f"Invalid value {value!r} for '{key}': expected")
    assert allowed in message


def test_the_session_timeout_may_not_exceed_max_poll_interval() -> None:
    message = refused({**CLASSIC, "session.timeout.ms": 60_000, "max.poll.interval.ms": 30_000})
    assert "'max.poll.interval.ms'" in message
    assert "'session.timeout.ms' (60000)" in message


def test_on_state_change_is_refused_with_classic() -> None:
    message = refused({**CLASSIC, "on_state_change": print})
    assert message.startswith("'on_state_change' is not supported with group.protocol=classic")


def test_the_consumer_protocol_key_group_remote_assignor_is_ignored_as_librdkafka_does() -> None:
    settings = parse_config({**CLASSIC, "group.remote.assignor": "uniform"}).data_plane
    assert settings["group.remote.assignor"] == "uniform"


def test_the_classic_consumer_gets_every_key_and_no_forced_ones() -> None:
    def on_commit(*_: object) -> None: ...

    given = {
        **CLASSIC,
        "enable.auto.commit": "false",
        "max.poll.interval.ms": 10_000,
        "group.instance.id": "static-1",
        "on_commit": on_commit,
        "fetch.wait.max.ms": "100",
        "sasl.password": "hunter2",
    }
    settings = parse_config(given).data_plane
    assert settings["group.protocol"] == "classic"
    assert settings["enable.auto.commit"] is False
    assert "enable.auto.offset.store" not in settings  # librdkafka's default applies
    assert settings["max.poll.interval.ms"] == 10_000
    assert settings["group.instance.id"] == "static-1"
    assert settings["on_commit"] is on_commit
    assert settings["fetch.wait.max.ms"] == "100"
    assert settings["client.id"] == "kafka-group-member"
    assert "hunter2" not in repr(settings)


def test_mixing_eager_and_cooperative_strategies_is_librdkafkas_invalid_arg() -> None:
    with pytest.raises(KafkaException) as info:
        Consumer({**CLASSIC, "partition.assignment.strategy": "range,cooperative-sticky"})
    assert info.value.args[0].code() == KafkaError._INVALID_ARG
    assert "same protocol type" in info.value.args[0].str()


def test_classic_gives_a_classic_consumer_that_is_a_consumer() -> None:
    consumer = Consumer({**CLASSIC, "session.timeout.ms": 6000}, log_level=0)
    try:
        assert isinstance(consumer, ClassicConsumer)
        assert isinstance(consumer, Consumer)
        assert (consumer.state, consumer.member_epoch, consumer.memberid()) == (
            "UNSUBSCRIBED",
            -1,
            None,
        )
        assert consumer.metrics()["assigned-partitions"] == 0
    finally:
        consumer.close()
    plain = Consumer(dict(BASE))
    try:
        assert type(plain) is Consumer
    finally:
        plain.close()


def test_every_public_method_of_consumer_is_the_classic_consumers_own() -> None:
    inherited = [
        name
        for name, _ in inspect.getmembers(Consumer)
        if not name.startswith("_") and name not in vars(ClassicConsumer)
    ]
    assert inherited == [], "ClassicConsumer must override these: " + ", ".join(inherited)


def test_close_options_librdkafka_cannot_honour_are_refused() -> None:
    dynamic = Consumer(dict(CLASSIC), log_level=0)
    with pytest.raises(KafkaException) as info:
        dynamic.close(group_membership="remain_in_group")
    assert info.value.args[0].code() == KafkaError._NOT_IMPLEMENTED
    assert "leaves the group on close" in str(info.value)
    dynamic.close(group_membership="leave_group")
    static = Consumer({**CLASSIC, "group.instance.id": "s-1"}, log_level=0)
    with pytest.raises(KafkaException, match="keeps a static member's seat"):
        static.close(group_membership="leave_group")
    static.close(group_membership="remain_in_group")
    with pytest.raises(RuntimeError, match="closed"):
        static.poll(0)


def test_member_listeners_are_not_available_with_classic() -> None:
    consumer = Consumer(dict(CLASSIC), log_level=0)
    try:
        with pytest.raises(KafkaException) as info:
            consumer.add_member_listener(print)
        assert info.value.args[0].code() == KafkaError._NOT_IMPLEMENTED
        with pytest.raises(ValueError, match="not a member listener"):
            consumer.remove_member_listener(print)
    finally:
        consumer.close()


def test_the_async_consumer_refuses_classic_naming_the_key() -> None:
    from consumer.aio import AsyncConsumer

    with pytest.raises(ConfigError, match="'group.protocol' must be 'consumer'"):
        AsyncConsumer(dict(CLASSIC))


def test_a_subclass_of_consumer_refuses_classic_instead_of_running_the_other_protocol() -> None:
    class Mine(Consumer):
        pass

    with pytest.raises(ConfigError, match="Mine subclasses consumer.Consumer"):
        Mine(dict(CLASSIC))
    mine = Mine(dict(BASE))
    try:
        assert type(mine) is Mine
    finally:
        mine.close()
