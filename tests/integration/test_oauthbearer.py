"""OAUTHBEARER end to end on a real broker: ``oauth_cb``, OIDC client credentials, token
renewal, KIP-368 re-authentication, a refused token, and the share consumer.

One broker serves the module (``consumer.testing.real.oauth``) with Kafka's unsecured JWS
validator on two SASL_PLAINTEXT listeners:

* ``EXPIRY``: ``connections.max.reauth.ms`` = 10 min, so each SASL session lasts as long as the
  token it was opened with: a client that does not renew its token and re-authenticate before
  the token expires has its connection closed by the broker;
* ``REAUTH``: ``connections.max.reauth.ms`` = 3000 ms: every connection must re-authenticate
  about every 3 s, whatever the token's lifetime.

Both planes of ``Consumer`` authenticate: the librdkafka data plane (which calls ``oauth_cb`` from
``poll()`` and fetches OIDC tokens itself) and the member's own connections (which call
``oauth_cb`` from a worker thread and fetch OIDC tokens with urllib). The member's log records
show that its connections re-authenticate in place: the number of sessions it opened does not
grow while re-authentications happen. Records, topics and group configs go through PLAINTEXT.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from share_consumer_support import poll_until, share_group

from consumer import Consumer, ShareConsumer
from consumer.testing.real.broker import LocalBroker, free_port
from consumer.testing.real.oauth import (
    TokenEndpoint,
    oauthbearer_listener_settings,
    unsecured_jwt,
)
from consumer.testing.real.security import Listener, listener_overrides

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REAUTH_MS = 3000
#: Short enough that every test outlives several tokens.
SHORT_TOKEN_S = 4.0
#: How long each test keeps consuming after the member is STABLE.
RUN_S = 8.0
STABLE_WITHIN_S = 45.0
ERROR_WITHIN_S = 20.0
#: asyncio's default executor names its threads asyncio_0, asyncio_1, ...
MEMBER_TOKEN_THREAD = "asyncio_"


@dataclass(frozen=True)
class OAuthBroker:
    plaintext: str
    expiry: str  # bootstrap of the listener whose sessions end with the token
    reauth: str  # bootstrap of the listener with connections.max.reauth.ms = 3000


@pytest.fixture(scope="module")
def broker() -> Iterator[OAuthBroker]:
    port, controller = free_port(), free_port()
    listeners = [
        Listener("EXPIRY", "SASL_PLAINTEXT", free_port()),
        Listener("REAUTH", "SASL_PLAINTEXT", free_port()),
    ]
    overrides = {
        **listener_overrides(port, controller, listeners),
        **oauthbearer_listener_settings("EXPIRY", max_reauth_ms=600_000),
        **oauthbearer_listener_settings("REAUTH", max_reauth_ms=REAUTH_MS),
    }
    with LocalBroker(port=port, overrides=overrides) as node:
        yield OAuthBroker(
            node.bootstrap_servers,
            f"127.0.0.1:{listeners[0].port}",
            f"127.0.0.1:{listeners[1].port}",
        )


@dataclass
class TokenCallback:
    """An ``oauth_cb`` issuing unsigned JWTs; records the calling thread of each call."""

    lifetime_s: float = 3600.0
    token: str | None = None  # a fixed (bad) token instead of a valid one
    calls: list[tuple[str, str | None]] = field(default_factory=list)

    def __call__(self, config: str | None) -> tuple[str, float, str, dict[str, str]]:
        self.calls.append((threading.current_thread().name, config))
        token, expiry = unsecured_jwt("alice", self.lifetime_s)
        return (self.token or token, expiry, "alice", {"traceId": "t1"})

    def member_calls(self) -> int:
        """Calls from the member: a worker thread of its background loop's executor."""
        return sum(1 for name, _ in self.calls if name.startswith(MEMBER_TOKEN_THREAD))

    def data_plane_calls(self) -> int:
        """Calls from librdkafka (confluent-kafka 2.16 calls from a librdkafka thread)."""
        return len(self.calls) - self.member_calls()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(broker: OAuthBroker) -> str:
    topic = _name("oauth")
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    return topic


def _produce(broker: OAuthBroker, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.plaintext})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0, "records still queued after 30 s"


def _sessions(caplog: pytest.LogCaptureFixture, what: str) -> int:
    """How many of the member's log records start with ``what`` ("connected to", ...)."""
    return sum(
        1
        for r in caplog.records
        if r.name.startswith("consumer.") and r.getMessage().startswith(what)
    )


@contextlib.contextmanager
def _consumer(config: dict[str, Any]) -> Iterator[Consumer]:
    consumer = Consumer(
        {"group.id": _name("group"), "auto.offset.reset": "earliest", **config},
    )
    try:
        yield consumer
    finally:
        consumer.close()


def _consume_through_token_lifetimes(
    broker: OAuthBroker,
    consumer: Consumer,
    caplog: pytest.LogCaptureFixture,
    states: list[str],
) -> None:
    """Subscribe, read a first batch, then keep reading and committing for RUN_S while new
    records arrive: every record once, commits read back, STABLE throughout, and the member's
    connections re-authenticated in place (no new session after the first STABLE)."""
    topic = _topic(broker)
    first = [f"first-{i}".encode() for i in range(5)]
    _produce(broker, topic, first)
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + STABLE_WITHIN_S
    while (len(received) < len(first) or consumer.state != "STABLE") and (
        time.monotonic() < deadline
    ):
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            received.append(message.value())
    assert consumer.state == "STABLE", f"not STABLE within {STABLE_WITHIN_S} s: {states}"
    stable_at = len(states)
    sessions_at_stable = _sessions(caplog, "connected to")
    reauths_at_stable = _sessions(caplog, "re-authenticated to")
    later: list[bytes] = []
    end = time.monotonic() + RUN_S
    batch = 0
    while time.monotonic() < end:
        value = f"later-{batch}".encode()
        _produce(broker, topic, [value])
        later.append(value)
        batch += 1
        pause_until = time.monotonic() + 1.0
        while time.monotonic() < pause_until:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                received.append(message.value())
        consumer.commit(asynchronous=False)
    drain_until = time.monotonic() + 15
    while len(received) < len(first) + len(later) and time.monotonic() < drain_until:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            received.append(message.value())
    assert received == first + later
    consumer.commit(asynchronous=False)
    (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    assert committed.offset == len(first) + len(later)
    assert states[stable_at:] == [], f"left STABLE: {states[stable_at:]}"
    assert consumer.state == "STABLE"
    reauths = _sessions(caplog, "re-authenticated to") - reauths_at_stable
    assert reauths >= 2, f"{reauths} re-authentications in {RUN_S} s"
    assert _sessions(caplog, "connected to") == sessions_at_stable, (
        "the member opened new sessions: the broker closed expired ones"
    )


def test_oauth_cb_consumes_and_commits_while_reauthenticating_every_3s(
    broker: OAuthBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="consumer")
    callback = TokenCallback()
    states: list[str] = []
    config = {
        "bootstrap.servers": broker.reauth,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.config": "scope=kafka",
        "oauth_cb": callback,
        "on_state_change": lambda previous, current: states.append(current),
    }
    with _consumer(config) as consumer:
        _consume_through_token_lifetimes(broker, consumer, caplog, states)
    assert callback.data_plane_calls() >= 1, f"the data plane never called oauth_cb: {callback}"
    assert callback.member_calls() >= 1, f"the member never called oauth_cb: {callback}"
    assert {config for _, config in callback.calls} == {"scope=kafka"}


def test_expiring_oidc_tokens_are_renewed_on_both_planes(
    broker: OAuthBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="consumer")
    states: list[str] = []
    with TokenEndpoint(lifetime_s=SHORT_TOKEN_S) as endpoint:
        config = {
            "bootstrap.servers": broker.expiry,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": endpoint.oauth_client_id,
            "sasl.oauthbearer.client.secret": endpoint.oauth_client_secret,
            "sasl.oauthbearer.token.endpoint.url": endpoint.url,
            "sasl.oauthbearer.scope": "kafka",
            "on_state_change": lambda previous, current: states.append(current),
        }
        with _consumer(config) as consumer:
            assert endpoint.oauth_client_secret not in repr(consumer)
            _consume_through_token_lifetimes(broker, consumer, caplog, states)
        # urllib names itself in User-Agent; librdkafka's HTTP client sends none.
        python = endpoint.granted_to("Python-urllib")
        librdkafka = endpoint.granted_to("") - python
    # Each plane renewed its token: RUN_S alone spans two lifetimes.
    assert python >= 3, f"the member fetched {python} tokens"
    assert librdkafka >= 3, f"the data plane fetched {librdkafka} tokens: {endpoint.requests}"
    assert not [r for r in endpoint.requests if not r.granted]
    for record in caplog.records:
        assert endpoint.oauth_client_secret not in record.getMessage()


def test_a_refused_token_is_a_clear_authentication_error(
    broker: OAuthBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="consumer")
    bad = "not-a-jwt-but-a-bearer-token"
    config = {
        "bootstrap.servers": broker.expiry,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": TokenCallback(token=bad),
        "log_level": 0,  # librdkafka's own authentication noise off
    }
    with _consumer(config) as consumer:
        consumer.subscribe([_name("never-read")])
        deadline = time.monotonic() + ERROR_WITHIN_S
        error: KafkaException | None = None
        while error is None:
            assert time.monotonic() < deadline, f"poll() raised nothing in {ERROR_WITHIN_S} s"
            try:
                message = consumer.poll(0.5)
            except KafkaException as exc:
                error = exc
            else:
                assert message is None or message.error() is not None, "record delivered"
        assert consumer.state == "FATAL"
    text = str(error)
    assert error.args[0].code() == KafkaError.SASL_AUTHENTICATION_FAILED, text
    assert "SASL_AUTHENTICATION_FAILED" in text, text
    assert "OAUTHBEARER" in text, text
    assert "alice" in text, text
    assert bad not in text
    for record in caplog.records:
        assert bad not in record.getMessage(), record.getMessage()


def test_share_consumer_with_oauth_cb_reads_and_acknowledges_across_reauthentications(
    broker: OAuthBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="consumer")
    topic = _topic(broker)
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    group_id = share_group(admin, _name)
    callback = TokenCallback(lifetime_s=SHORT_TOKEN_S)
    config = {
        "bootstrap.servers": broker.reauth,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": callback,
        "group.id": group_id,
    }
    expected = [f"s{i}".encode() for i in range(6)]
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        _produce(broker, topic, expected[:3])
        got = poll_until(consumer, lambda got: len(got) >= 3, bound_s=STABLE_WITHIN_S)
        assert consumer.commit_sync(30) == {TopicPartition(topic, 0): None}
        reauths = _sessions(caplog, "re-authenticated to")
        wait_until = time.monotonic() + 2 * REAUTH_MS / 1000
        while time.monotonic() < wait_until:  # spans two re-authentication periods
            assert len(consumer.poll(0.2)) == 0
        assert _sessions(caplog, "re-authenticated to") >= reauths + 2
        _produce(broker, topic, expected[3:])
        got += poll_until(consumer, lambda more: len(more) >= 3, bound_s=30)
        assert consumer.commit_sync(30) == {TopicPartition(topic, 0): None}
    assert [m.value() for m in got] == expected
    assert callback.member_calls() >= 2, f"the token was never renewed: {callback}"
    assert all(name.startswith(MEMBER_TOKEN_THREAD) for name, _ in callback.calls)
