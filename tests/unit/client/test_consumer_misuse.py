"""Bad input and misuse of Consumer get clear errors (no broker needed: nothing is subscribed)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from consumer import (
    CallbackMisuseError,
    ConfigError,
    Consumer,
    ConsumerClosedError,
    ConsumerError,
)

# A closed loopback port: the data plane is created but never needs to connect in these tests.
CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "misuse"}


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    instance = Consumer(CONFIG)
    yield instance
    instance.close()


def test_unknown_config_key_names_close_matches() -> None:
    with pytest.raises(ConfigError, match="did you mean 'group.id'"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "gruop.id": "x"})


def test_classic_only_keys_are_refused_naming_the_replacement() -> None:
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms"):
        Consumer({**CONFIG, "group.protocol": "consumer", "heartbeat.interval.ms": 3000})


def test_classic_only_keys_without_a_protocol_are_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("misuse-test-app")
    with caplog.at_level(logging.WARNING):
        Consumer({**CONFIG, "session.timeout.ms": 6000}, logger=logger).close()
        Consumer({**CONFIG, "heartbeat.interval.ms": 3000}).close()
    warnings = [(r.name, r.getMessage()) for r in caplog.records if "is ignored" in r.getMessage()]
    assert [name for name, _ in warnings] == ["misuse-test-app", "consumer"]
    assert warnings[0][1].startswith("'session.timeout.ms' is a classic-protocol setting")
    assert "'group.consumer.session.timeout.ms'" in warnings[0][1]
    assert "group.protocol=classic" in warnings[0][1]
    assert "'group.consumer.heartbeat.interval.ms'" in warnings[1][1]


@pytest.mark.parametrize(
    ("topics", "error", "match"),
    [
        ("a-topic", TypeError, "list"),
        ([], TypeError, "non-empty"),
        ([""], TypeError, "non-empty"),
        (["bad topic"], ValueError, "invalid topic name 'bad topic'"),
        (["x" * 250], ValueError, "1-249"),
        ([3], TypeError, "strings"),
    ],
)
def test_subscribe_refuses_bad_topics(
    consumer: Consumer, topics: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        consumer.subscribe(topics)  # type: ignore[arg-type]
    assert consumer.state == "UNSUBSCRIBED"


def test_subscribe_refuses_a_callback_that_is_not_callable(consumer: Consumer) -> None:
    with pytest.raises(TypeError, match="on_assign must be callable"):
        consumer.subscribe(["t"], on_assign="nope")  # type: ignore[arg-type]


def test_commit_without_offsets_is_a_clear_kafka_error(consumer: Consumer) -> None:
    with pytest.raises(KafkaException) as caught:
        consumer.commit(asynchronous=False)
    assert isinstance(caught.value, ConsumerError)
    assert caught.value.args[0].code() == KafkaError._NO_OFFSET
    assert caught.value.args[0].str() == "Commit failed: Local: No offset stored"


def test_store_offsets_needs_manual_offset_storing(consumer: Consumer) -> None:
    with pytest.raises(KafkaException, match="enable.auto.offset.store=false"):
        consumer.store_offsets(offsets=[TopicPartition("t", 0, 1)])


def test_every_call_after_close_says_the_consumer_is_closed() -> None:
    instance = Consumer(CONFIG)
    instance.close()
    instance.close()  # idempotent, as confluent-kafka's
    for call in (
        lambda: instance.poll(0),
        lambda: instance.consume(1, 0),
        lambda: instance.subscribe(["t"]),
        instance.unsubscribe,
        instance.assignment,
        lambda: instance.commit(asynchronous=False),
        lambda: instance.position([TopicPartition("t", 0)]),
    ):
        with pytest.raises(ConsumerClosedError, match="closed"):
            call()
    assert issubclass(ConsumerClosedError, RuntimeError)


def test_consume_checks_the_batch_size(consumer: Consumer) -> None:
    with pytest.raises(ValueError, match="num_messages"):
        consumer.consume(0, 0)


def test_poll_before_subscribe_returns_none_without_a_member(consumer: Consumer) -> None:
    assert consumer.poll(0) is None
    assert consumer.memberid() is None
    assert consumer.member_epoch == 0
    assert consumer.assignment() == []


def test_calls_not_allowed_inside_callbacks_are_refused(consumer: Consumer) -> None:
    server = consumer._server  # the callback guard, exercised without a broker
    server.in_callback = True
    try:
        with pytest.raises(CallbackMisuseError, match="poll"):
            consumer.poll(0)
        with pytest.raises(CallbackMisuseError, match="close"):
            consumer.close()
        with pytest.raises(CallbackMisuseError, match="subscribe"):
            consumer.subscribe(["t"])
    finally:
        server.in_callback = False


def test_set_sasl_credentials_needs_a_password_mechanism_and_strings(
    consumer: Consumer,
) -> None:
    with pytest.raises(ValueError, match="security.protocol sasl_plaintext or sasl_ssl"):
        consumer.set_sasl_credentials("alice", "secret")
    scram = Consumer(
        {
            **CONFIG,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "old",
        }
    )
    try:
        with pytest.raises(TypeError, match="password must be a string"):
            scram.set_sasl_credentials("alice", None)  # type: ignore[arg-type]
        scram.set_sasl_credentials("bob", "new-Secret")
        assert "new-Secret" not in repr(scram)
    finally:
        scram.close()
