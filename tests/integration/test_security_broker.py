"""TLS, SASL (PLAIN, SCRAM-SHA-256/512) and ACLs on a real local broker, with confluent-kafka.

One extra broker serves the whole module: PLAINTEXT (super user, used to set things up), SSL
(mutual TLS), SASL_PLAINTEXT and SASL_SSL, with ``StandardAuthorizer`` on. Users:

* ``alice`` and the TLS client certificate (``User:client``): all rights on topics and groups;
* ``bob``: all rights on topics, none on groups;
* ``carol``: all rights on groups, none on topics.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)
from security_support import grant_test_acls

from consumer.testing.real.broker import LocalBroker
from consumer.testing.real.security import SecureBrokerSettings, secure_broker_settings

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
RECORDS = 5


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBrokerSettings]:
    """The module's broker with every secure listener and ACLs on (started once)."""
    settings = secure_broker_settings(
        tmp_path_factory.mktemp("pki"), users=USERS, acls=True, super_users=("admin",)
    )
    broker: LocalBroker = settings.broker()
    started = time.monotonic()
    with broker:
        print(f"secure broker ready in {time.monotonic() - started:.1f} s")
        grant_test_acls(settings, broker.bootstrap_servers)
        yield settings


@pytest.fixture
def plaintext_admin(secure: SecureBrokerSettings) -> AdminClient:
    """Super-user admin over the PLAINTEXT listener."""
    return AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(timeout=30)


def _produce(config: dict[str, str], topic: str, values: list[bytes]) -> list[KafkaError]:
    """Produce ``values``; returns the delivery errors (empty when all were acknowledged)."""
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer(config)
    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    assert producer.flush(30) == 0, "records still queued after 30 s"
    return errors


def _consume(config: dict[str, str], topic: str, count: int, timeout_s: float) -> list[bytes]:
    consumer = Consumer(
        {
            **config,
            "group.id": _name("group"),
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            value = msg.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(
    ("listener", "mechanism", "user"),
    [
        ("SSL", None, None),
        ("SASL_PLAINTEXT", "PLAIN", "alice"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice"),
        ("SASL_SSL", "PLAIN", "alice"),
        ("SASL_SSL", "SCRAM-SHA-256", "alice"),
        ("SASL_SSL", "SCRAM-SHA-512", "alice"),
    ],
)
def test_admin_produce_and_consume_over_secure_listener(
    secure: SecureBrokerSettings, listener: str, mechanism: str | None, user: str | None
) -> None:
    config = secure.client_config(listener, user=user, mechanism=mechanism or "PLAIN")
    admin = AdminClient(config)
    port = int(config["bootstrap.servers"].rsplit(":", 1)[1])
    assert [b.port for b in admin.list_topics(timeout=10).brokers.values()] == [port]
    topic = _name(f"secure-{listener.lower()}")
    _create_topic(admin, topic)  # the authenticated user's own CREATE right
    values = [f"{listener}-{i}".encode() for i in range(RECORDS)]
    assert _produce(config, topic, values) == []
    assert _consume(config, topic, RECORDS, timeout_s=30) == values


def _first_client_error(config: dict[str, str], timeout_s: float) -> KafkaError:
    """The first error an admin client reports through ``error_cb`` (it connects at creation)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # serves error_cb; returns as soon as an event is there
    assert errors, f"no client error within {timeout_s} s"
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1)
    return errors[0]


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_wrong_password_is_refused(
    secure: SecureBrokerSettings, listener: str, mechanism: str
) -> None:
    config = secure.client_config(listener, user="alice", password="wrong", mechanism=mechanism)
    error = _first_client_error(config, timeout_s=10)
    assert error.code() == KafkaError._AUTHENTICATION, error


def test_tls_client_without_certificate_is_refused(secure: SecureBrokerSettings) -> None:
    config = secure.client_config("SSL")
    del config["ssl.certificate.location"], config["ssl.key.location"]
    error = _first_client_error(config, timeout_s=10)
    # The broker's handshake alert ("bad certificate") reaches the client as a transport error.
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT), error
    assert "certificate" in error.str(), error


def _first_consumer_error(config: dict[str, str], topic: str, timeout_s: float) -> KafkaError:
    consumer = Consumer(
        {
            **config,
            "group.id": _name("denied"),
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            assert error is not None, f"record delivered to an unauthorized user: {msg.value()!r}"
            return error
    finally:
        consumer.close()
    raise AssertionError(f"no consumer error within {timeout_s} s")


def test_user_without_group_rights_is_refused(
    secure: SecureBrokerSettings, plaintext_admin: AdminClient
) -> None:
    topic = _name("acl-group")
    _create_topic(plaintext_admin, topic)
    assert _produce({"bootstrap.servers": secure.bootstrap("PLAINTEXT")}, topic, [b"secret"]) == []
    config = secure.client_config("SASL_PLAINTEXT", user="bob", mechanism="SCRAM-SHA-256")
    error = _first_consumer_error(config, topic, timeout_s=30)
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error


def test_user_without_topic_rights_gets_topic_authorization_failed(
    secure: SecureBrokerSettings, plaintext_admin: AdminClient
) -> None:
    topic = _name("acl-topic")
    _create_topic(plaintext_admin, topic)
    assert _produce({"bootstrap.servers": secure.bootstrap("PLAINTEXT")}, topic, [b"secret"]) == []
    config = secure.client_config("SASL_PLAINTEXT", user="carol", mechanism="SCRAM-SHA-512")
    error = _first_consumer_error(config, topic, timeout_s=30)
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    produce_errors = _produce(config, topic, [b"denied"])
    assert [e.code() for e in produce_errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_authorized_user_can_still_consume_the_denied_topics(
    secure: SecureBrokerSettings, plaintext_admin: AdminClient
) -> None:
    """The refusals above come from ACLs, not from a broken topic: alice reads the same data."""
    topic = _name("acl-control")
    _create_topic(plaintext_admin, topic)
    assert _produce({"bootstrap.servers": secure.bootstrap("PLAINTEXT")}, topic, [b"visible"]) == []
    config = secure.client_config("SASL_PLAINTEXT", user="alice", mechanism="SCRAM-SHA-512")
    assert _consume(config, topic, 1, timeout_s=30) == [b"visible"]
