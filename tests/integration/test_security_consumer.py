"""Our ``consumer.Consumer`` over TLS and SASL, end to end on both planes, and with ACLs.

One extra broker serves the whole module (``consumer.testing.real.security``): PLAINTEXT (the
administrator's door: topics, ACLs and test records go through it), SSL (mutual TLS), and
SASL_PLAINTEXT / SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, with
``StandardAuthorizer`` on. Principals:

* ``alice`` and the TLS client certificate (``User:client``): all rights on topics and groups;
* ``bob``: all rights on topics, none on groups (GROUP_AUTHORIZATION_FAILED, FATAL);
* ``carol``: all rights on groups, none on topics (TOPIC_AUTHORIZATION_FAILED, not fatal).

The member's control plane (heartbeats, FindCoordinator, OffsetCommit/Fetch, Metadata) and the
librdkafka data plane both use the secure listener given as ``bootstrap.servers``: the broker
advertises only that listener to clients that reach it, and group ACLs apply to the heartbeat.
Every wait is bounded.

A refused coordinator lookup (SASL_AUTHENTICATION_FAILED on connect, GROUP_AUTHORIZATION_FAILED
from the broker) reaches the member with its error code and ends it in FATAL, raised from poll().
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)
from security_support import grant_test_acls

from consumer import Consumer
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.retry import CONNECT_RETRY
from consumer._runtime.sasl_mechanisms import SaslAuthenticationFailedError
from consumer.config import parse_config
from consumer.errors import GroupAuthorizationFailedError
from consumer.testing.real.broker import fast_group_settings
from consumer.testing.real.security import SecureBrokerSettings, secure_broker_settings
from tests.support import wait_until

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2", "carol": "carol-Secret-3"}
WRONG_PASSWORD = "not-the-Password-9"
RECORDS = 5
CONSUME_WITHIN_S = 45.0
ERROR_WITHIN_S = 30.0
#: A fatal error needs no retries to surface.
FATAL_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBrokerSettings]:
    """The module's broker with every secure listener and ACLs on (started once)."""
    settings = secure_broker_settings(tmp_path_factory.mktemp("pki"), users=USERS, acls=True)
    with settings.broker(overrides=fast_group_settings()) as broker:
        grant_test_acls(settings, broker.bootstrap_servers)
        yield settings


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic_with_records(secure: SecureBrokerSettings, values: list[bytes]) -> str:
    """A new one-partition topic holding ``values``, made by the super user over PLAINTEXT."""
    plaintext = {"bootstrap.servers": secure.bootstrap("PLAINTEXT")}
    topic = _name("secure")
    admin = AdminClient(plaintext)
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(timeout=30)
    producer = Producer(plaintext)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0, "records still queued after 30 s"
    return topic


@pytest.fixture
def consumers() -> Iterator[Callable[[dict[str, Any]], Consumer]]:
    """Builds our consumers; each is closed at teardown (errors there are not the test's)."""
    made: list[Consumer] = []

    def make(config: dict[str, Any]) -> Consumer:
        consumer = Consumer({"group.id": _name("group"), "auto.offset.reset": "earliest", **config})
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        with contextlib.suppress(Exception):  # teardown; the test has reported already
            consumer.close()


def _first_poll_error(consumer: Consumer, within_s: float) -> KafkaException:
    """Poll until ``poll()`` raises; fail if it does not within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            message = consumer.poll(0.5)
        except KafkaException as exc:
            return exc
        assert message is None or message.error() is not None, "record delivered"
    raise AssertionError(f"poll() raised nothing within {within_s} s (state {consumer.state})")


def _assert_no_secret(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    for record in caplog.records:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += str(record.exc_info[1])
        for secret in secrets:
            assert secret not in text, f"secret in log record {record.name}: {text}"


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_consumer_consumes_and_commits_over_a_secure_listener(
    secure: SecureBrokerSettings,
    consumers: Callable[[dict[str, Any]], Consumer],
    caplog: pytest.LogCaptureFixture,
    listener: str,
    mechanism: str | None,
) -> None:
    caplog.set_level(logging.DEBUG)
    values = [f"{listener}-{mechanism}-{i}".encode() for i in range(RECORDS)]
    topic = _topic_with_records(secure, values)
    user = None if mechanism is None else "alice"
    config = secure.client_config(listener, user=user, mechanism=mechanism or "PLAIN")
    consumer = consumers({**config, "enable.auto.commit": False})
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + CONSUME_WITHIN_S
    while len(received) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        value = message.value()
        assert isinstance(value, bytes)
        received.append(value)
    assert received == values, f"state {consumer.state}"
    # Records flow as soon as the assignment is applied; the ack heartbeat may still be on its
    # way (seen under heavy CPU load): wait for STABLE while polling, with nothing more arriving.
    while consumer.state != "STABLE" and time.monotonic() < deadline:
        assert consumer.poll(0.1) is None, "a record arrived twice"
    assert consumer.state == "STABLE"
    # Commit and read back through the control plane (OffsetCommit / OffsetFetch).
    consumer.commit(asynchronous=False)
    (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    assert committed.offset == RECORDS
    if mechanism is not None:
        assert any("authenticated to" in r.getMessage() for r in caplog.records)
        _assert_no_secret(caplog, USERS["alice"])


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_wrong_password_is_a_clear_fatal_error_from_poll(
    secure: SecureBrokerSettings,
    consumers: Callable[[dict[str, Any]], Consumer],
    caplog: pytest.LogCaptureFixture,
    listener: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = secure.client_config(
        listener, user="alice", password=WRONG_PASSWORD, mechanism=mechanism
    )
    consumer = consumers({**config, "log_level": 0})  # librdkafka's own auth noise off
    consumer.subscribe([_name("never-read")])
    error = _first_poll_error(consumer, FATAL_WITHIN_S)
    text = str(error)
    assert "SASL_AUTHENTICATION_FAILED" in text, text
    assert mechanism in text, text
    assert WRONG_PASSWORD not in text
    assert error.args[0].fatal()
    assert consumer.state == "FATAL"
    _assert_no_secret(caplog, WRONG_PASSWORD)


def test_member_without_group_rights_ends_fatal_with_group_authorization_failed(
    secure: SecureBrokerSettings, consumers: Callable[[dict[str, Any]], Consumer]
) -> None:
    topic = _topic_with_records(secure, [b"secret"])
    config = secure.client_config("SASL_PLAINTEXT", user="bob", mechanism="SCRAM-SHA-256")
    consumer = consumers(config)
    consumer.subscribe([topic])
    error = _first_poll_error(consumer, FATAL_WITHIN_S)
    assert "GROUP_AUTHORIZATION_FAILED" in str(error), error
    assert error.args[0].fatal()
    assert consumer.state == "FATAL"
    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
        consumer.poll(0)  # a fatal error is raised again on every call


def test_member_without_topic_rights_gets_topic_authorization_failed_as_poll_error_events(
    secure: SecureBrokerSettings, consumers: Callable[[dict[str, Any]], Consumer]
) -> None:
    """As confluent-kafka: ``poll()`` returns an error event (not fatal, never raised, not
    through ``error_cb``), again with later heartbeats; the member stays in the group."""
    topic = _topic_with_records(secure, [b"secret"])
    reported: list[KafkaError] = []
    config = secure.client_config("SASL_PLAINTEXT", user="carol", mechanism="SCRAM-SHA-512")
    consumer = consumers({**config, "error_cb": reported.append})
    consumer.subscribe([topic])
    events: list[KafkaError] = []

    def error_events(count: int) -> Callable[[], bool]:
        def arrived() -> bool:
            message = consumer.poll(0.5)  # must not raise: the error is not fatal
            if message is not None:
                assert message.error() is not None, "record delivered to carol"
                events.append(message.error())
            return len(events) >= count

        return arrived

    wait_until(error_events(1), ERROR_WITHIN_S, "a TOPIC_AUTHORIZATION_FAILED error event")
    assert [e.code() for e in events] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert not events[0].fatal()
    assert events[0].str() == "ConsumerGroupHeartbeat failed: Broker: Topic authorization failed"
    assert consumer.state not in ("FATAL", "UNSUBSCRIBED"), consumer.state
    # Still a member that keeps heartbeating: the error comes back, never raised.
    wait_until(error_events(2), ERROR_WITHIN_S, "the error event again")
    assert {e.code() for e in events} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert consumer.state not in ("FATAL", "UNSUBSCRIBED"), consumer.state
    assert [e for e in reported if e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED] == []


# ----------------------------------------------------------------------------------------------
# The control plane alone (ClusterClient), against the same broker


async def _lookup(secure: SecureBrokerSettings, config: dict[str, str], group: str) -> None:
    """Bootstrap and FindCoordinator through our own connections with ``config``'s security."""
    parsed = parse_config({**config, "group.id": group})
    cluster = ClusterClient(
        ",".join(str(a) for a in parsed.bootstrap_servers),
        request_timeout_ms=10_000,
        connect_retry=CONNECT_RETRY,
        security=parsed.security,
    )
    try:
        await asyncio.wait_for(cluster.find_coordinator(group), ERROR_WITHIN_S)
    finally:
        await cluster.close()


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_control_plane_refuses_a_wrong_password_at_once_without_the_secret(
    secure: SecureBrokerSettings,
    caplog: pytest.LogCaptureFixture,
    listener: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = secure.client_config(
        listener, user="alice", password=WRONG_PASSWORD, mechanism=mechanism
    )
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as caught:
        asyncio.run(_lookup(secure, config, _name("group")))
    assert time.monotonic() - started < 10, "an authentication failure must not be retried"
    text = str(caught.value)
    assert text.startswith("SASL_AUTHENTICATION_FAILED (58)"), text
    assert "'alice'" in text, text
    assert mechanism in text, text
    assert WRONG_PASSWORD not in text
    _assert_no_secret(caplog, WRONG_PASSWORD)


def test_control_plane_authenticates_as_the_sasl_user(secure: SecureBrokerSettings) -> None:
    """bob (no group rights) is refused FindCoordinator; alice is not: the principal is ours."""
    group = _name("group")
    alice = secure.client_config("SASL_SSL", user="alice", mechanism="SCRAM-SHA-256")
    asyncio.run(_lookup(secure, alice, group))
    bob = secure.client_config("SASL_SSL", user="bob", mechanism="SCRAM-SHA-256")
    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(_lookup(secure, bob, group))


def test_set_sasl_credentials_applies_to_both_planes_for_new_connections(
    secure: SecureBrokerSettings,
    consumers: Callable[[dict[str, Any]], Consumer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    values = [f"new-credentials-{i}".encode() for i in range(RECORDS)]
    topic = _topic_with_records(secure, values)
    config = secure.client_config(
        "SASL_SSL", user="alice", password=WRONG_PASSWORD, mechanism="SCRAM-SHA-256"
    )
    consumer = consumers({**config, "enable.auto.commit": False, "log_level": 0})
    # Corrected before the member connects; librdkafka's data plane has tried (and failed)
    # already, so its next connection must take the new password too.
    consumer.set_sasl_credentials("alice", USERS["alice"])
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + CONSUME_WITHIN_S
    while len(received) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value() or b"")
    assert received == values, f"state {consumer.state}"
    # Changed while connected: the open connections go on as they authenticated.
    consumer.set_sasl_credentials("alice", WRONG_PASSWORD)
    consumer.commit(asynchronous=False)
    (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    assert committed.offset == RECORDS
    assert consumer.state == "STABLE"
    assert WRONG_PASSWORD not in repr(consumer)
    _assert_no_secret(caplog, USERS["alice"], WRONG_PASSWORD)
