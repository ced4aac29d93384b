"""``ShareConsumer`` over TLS and SASL on a real broker, and ``set_sasl_credentials``.

One extra broker serves the module (``consumer.testing.real.security``): PLAINTEXT for the
administrator (topics, group configs, records), SSL (mutual TLS), SASL_PLAINTEXT and SASL_SSL with
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, no ACLs. The share consumer's coordinator connection
(heartbeats) and its share sessions (ShareFetch, ShareAcknowledge) all use the secure listener it
is given; a wrong password is a clear SASL_AUTHENTICATION_FAILED from ``poll``; no secret reaches
a log record or a message. New SASL credentials apply to connections authenticated afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from share_consumer_support import CallbackLog, poll_until, produce, share_group

from consumer import ShareConsumer
from consumer._config.types import Secret
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.sasl_mechanisms import SaslAuthenticationFailedError, SaslCredentials
from consumer.config import parse_config
from consumer.testing.real.security import SecureBrokerSettings, secure_broker_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

USERS = {"alice": "alice-Share-Secret-1"}
WRONG_PASSWORD = "not-the-Share-Password-9"
RECORDS = 5
ERROR_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBrokerSettings]:
    settings = secure_broker_settings(tmp_path_factory.mktemp("share-pki"), users=USERS)
    with settings.broker():
        yield settings


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


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
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ],
)
def test_share_consumer_consumes_and_acknowledges_over_a_secure_listener(
    secure: SecureBrokerSettings,
    caplog: pytest.LogCaptureFixture,
    listener: str,
    mechanism: str | None,
) -> None:
    caplog.set_level(logging.DEBUG)
    plaintext = secure.bootstrap("PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": plaintext})
    topic = _name("secure-share")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    group_id = share_group(admin, _name, share_record_lock_duration_ms=str(30_000))
    produce(plaintext, topic, RECORDS)
    config = secure.client_config(
        listener, user=None if mechanism is None else "alice", mechanism=mechanism or "PLAIN"
    )
    log = CallbackLog()
    with ShareConsumer({**config, "group.id": group_id}) as consumer:
        consumer.set_acknowledgement_commit_callback(log)
        consumer.subscribe([topic])
        got = poll_until(consumer, lambda got: len(got) >= RECORDS, bound_s=60)
        assert [m.value() for m in got] == [f"v{i}".encode() for i in range(RECORDS)]
        assert consumer.commit_sync(30) == {TopicPartition(topic, 0): None}
        if mechanism is not None:  # applies to connections opened from now on; these stay
            consumer.set_sasl_credentials("alice", USERS["alice"])
            assert USERS["alice"] not in repr(consumer)
    assert log.offsets() == [(0, offset) for offset in range(RECORDS)]
    assert log.codes() == {None}
    if mechanism is not None:
        assert any("authenticated to" in r.getMessage() for r in caplog.records)
        _assert_no_secret(caplog, USERS["alice"])


@pytest.mark.parametrize(
    ("listener", "mechanism"), [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")]
)
def test_wrong_password_is_a_clear_authentication_error_from_poll(
    secure: SecureBrokerSettings,
    caplog: pytest.LogCaptureFixture,
    listener: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = secure.client_config(
        listener, user="alice", password=WRONG_PASSWORD, mechanism=mechanism
    )
    with ShareConsumer({**config, "group.id": _name("share")}) as consumer:
        consumer.subscribe([_name("never-read")])
        deadline = time.monotonic() + ERROR_WITHIN_S
        error: KafkaException | None = None
        while error is None:
            assert time.monotonic() < deadline, f"poll() raised nothing within {ERROR_WITHIN_S} s"
            try:
                assert len(consumer.poll(0.5)) == 0
            except KafkaException as exc:
                error = exc
    assert error.args[0].code() == KafkaError.SASL_AUTHENTICATION_FAILED
    text = str(error)
    assert "SASL_AUTHENTICATION_FAILED" in text or "Authentication failed" in text, text
    assert WRONG_PASSWORD not in text
    _assert_no_secret(caplog, WRONG_PASSWORD)


def test_new_sasl_credentials_apply_to_new_authentications_only(
    secure: SecureBrokerSettings,
) -> None:
    mechanism = "SCRAM-SHA-256"
    right = parse_config(
        {**secure.client_config("SASL_SSL", user="alice", mechanism=mechanism), "group.id": "g"}
    )
    wrong = SaslCredentials(mechanism, "alice", Secret(WRONG_PASSWORD))
    good = SaslCredentials(mechanism, "alice", Secret(USERS["alice"]))

    async def scenario() -> None:
        bootstrap = secure.bootstrap("SASL_SSL")
        # Configured wrong, corrected before connecting: the first authentication succeeds.
        wrong_config = parse_config(
            {
                **secure.client_config(
                    "SASL_SSL", user="alice", password=WRONG_PASSWORD, mechanism=mechanism
                ),
                "group.id": "g",
            }
        )
        cluster = ClusterClient(bootstrap, security=wrong_config.security)
        cluster.set_sasl_credentials(good)
        async with cluster:
            assert (await cluster.metadata(topics=())).brokers
            # Changed while connected: the open connection goes on as it authenticated.
            cluster.set_sasl_credentials(wrong)
            assert (await cluster.metadata(topics=())).brokers
        # A client configured right but changed to wrong before connecting is refused.
        refused = ClusterClient(bootstrap, security=right.security)
        refused.set_sasl_credentials(wrong)
        with pytest.raises(SaslAuthenticationFailedError) as caught:
            async with refused:
                pass
        assert WRONG_PASSWORD not in str(caught.value)

    asyncio.run(scenario())


def test_set_sasl_credentials_needs_a_sasl_listener(secure: SecureBrokerSettings) -> None:
    config = secure.client_config("SSL")
    with ShareConsumer({**config, "group.id": _name("share")}) as consumer:
        with pytest.raises(ValueError, match="security.protocol"):
            consumer.set_sasl_credentials("alice", "x")
        with pytest.raises(TypeError, match="password"):
            consumer.set_sasl_credentials("alice", None)  # type: ignore[arg-type]
