"""The dict handed to the librdkafka data-plane consumer, and the checks across keys."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Consumer as LibrdkafkaConsumer

from consumer.config import ConfigError, DataPlaneSettings, parse_config

BASE: dict[str, object] = {"bootstrap.servers": "127.0.0.1:1", "group.id": "orders"}

MEMBER_ONLY_KEYS = [
    "group.protocol",
    "group.remote.assignor",
    "group.instance.id",
    "max.poll.interval.ms",
    "auto.commit.interval.ms",
    "on_commit",
    "on_state_change",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
]


def test_data_plane_never_commits_or_stores_offsets() -> None:
    data_plane = parse_config(
        {**BASE, "enable.auto.commit": True, "enable.auto.offset.store": "true"}
    ).data_plane
    assert data_plane["enable.auto.commit"] is False
    assert data_plane["enable.auto.offset.store"] is False


def test_data_plane_gets_the_member_group_id() -> None:
    assert parse_config(BASE).data_plane["group.id"] == "orders"


def test_member_keys_are_not_forwarded() -> None:
    config = parse_config(
        {
            **BASE,
            "group.protocol": "consumer",
            "group.remote.assignor": "range",
            "group.instance.id": "i-1",
            "max.poll.interval.ms": 60_000,
            "auto.commit.interval.ms": 1000,
            "on_commit": print,
            "on_state_change": print,
        }
    )
    assert config.group_remote_assignor == "range"
    for key in MEMBER_ONLY_KEYS:
        assert key not in config.data_plane


def test_shared_keys_are_forwarded_in_checked_form() -> None:
    def on_error(err: object) -> None:
        pass

    logger = logging.getLogger("test.dataplane")
    data_plane = parse_config(
        {
            **BASE,
            "client.id": "app-1",
            "client.rack": "use1-az1",
            "auto.offset.reset": "smallest",
            "isolation.level": "READ_UNCOMMITTED",
            "socket.timeout.ms": "30000",
            "reconnect.backoff.max.ms": 5000,
            "error_cb": on_error,
            "logger": logger,
        }
    ).data_plane
    assert data_plane["client.id"] == "app-1"
    assert data_plane["client.rack"] == "use1-az1"
    assert data_plane["auto.offset.reset"] == "earliest"
    assert data_plane["isolation.level"] == "read_uncommitted"
    assert data_plane["socket.timeout.ms"] == 30_000
    assert data_plane["reconnect.backoff.max.ms"] == 5000
    assert data_plane["error_cb"] is on_error
    assert data_plane["logger"] is logger


def test_default_client_id_is_forwarded() -> None:
    assert parse_config(BASE).data_plane["client.id"] == "kafka-group-member"


def test_security_is_forwarded() -> None:
    data_plane = parse_config(
        {
            **BASE,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "scram-sha-256",
            "sasl.username": "alice",
            "sasl.password": "pw",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kpw",
            "ssl.endpoint.identification.algorithm": "none",
            "enable.ssl.certificate.verification": False,
        }
    ).data_plane
    assert {k: v for k, v in data_plane.items() if k.startswith(("ssl", "sasl", "security"))} == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "pw",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/k.pem",
        "ssl.key.password": "kpw",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert data_plane["enable.ssl.certificate.verification"] is False


def test_data_plane_keys_are_forwarded_untouched() -> None:
    def stats(json_text: str) -> None:
        pass

    given = {
        "fetch.min.bytes": "1024",
        "fetch.max.bytes": 10_485_760,
        "fetch.wait.max.ms": 100,
        "max.partition.fetch.bytes": 2_097_152,
        "queued.min.messages": 1000,
        "queued.max.messages.kbytes": "4096",
        "check.crcs": "TRUE",
        "statistics.interval.ms": 1000,
        "debug": "CGRP,fetch",
        "log_level": 7,
        "topic.metadata.refresh.interval.ms": -1,
        "metadata.max.age.ms": 60_000,
        "socket.keepalive.enable": True,
        "api.version.request": True,
        "enable.partition.eof": True,
        "stats_cb": stats,
    }
    data_plane = parse_config({**BASE, **given}).data_plane
    for key, value in given.items():
        assert data_plane[key] is value


def test_data_plane_settings_is_a_read_only_mapping() -> None:
    settings = parse_config(BASE).data_plane
    assert isinstance(settings, DataPlaneSettings)
    assert len(settings) == len(dict(settings))
    assert settings == dict(settings)
    assert hash(settings) == hash(parse_config(BASE).data_plane)
    assert settings != 5


@pytest.mark.parametrize(
    ("extra", "key", "needed"),
    [
        ({"reconnect.backoff.ms": 5000, "reconnect.backoff.max.ms": 200}, "reconnect.backoff.max.ms", "'reconnect.backoff.ms' (5000)"),  # noqa: E501
        ({"receive.message.max.bytes": 1_000_000}, "receive.message.max.bytes", "'fetch.max.bytes' + 512 (52429312)"),  # noqa: E501
        ({"fetch.max.bytes": 1000, "receive.message.max.bytes": 2000}, "fetch.max.bytes", "'message.max.bytes' (1000000)"),  # noqa: E501
        ({"message.max.bytes": 100_000_000}, "fetch.max.bytes", "'message.max.bytes' (100000000)"),
    ],
)  # fmt: skip
def test_cross_key_rules(extra: dict[str, object], key: str, needed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, **extra})
    assert f"for '{key}'" in str(info.value)
    assert needed in str(info.value)


def test_cross_key_rules_accept_consistent_values() -> None:
    parse_config({**BASE, "fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_000_512})
    parse_config({**BASE, "reconnect.backoff.ms": 200, "reconnect.backoff.max.ms": 200})
    # librdkafka only warns about this one; so do we (not at all)
    parse_config({**BASE, "retry.backoff.ms": 500, "retry.backoff.max.ms": 200})


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "u",
            "sasl.password": "p",
            "auto.offset.reset": "beginning",
            "isolation.level": "READ_UNCOMMITTED",
            "debug": "cgrp",
            "log_level": 0,
            "fetch.max.bytes": 1_000_000,
            "receive.message.max.bytes": 1_000_512,
            "client.rack": "r1",
            "stats_cb": print,
            "error_cb": print,
            "logger": logging.getLogger("test.librdkafka"),
        },
    ],
)
def test_librdkafka_accepts_the_data_plane_dict(extra: dict[str, object]) -> None:
    """librdkafka itself has the last word: build (and close) a real confluent-kafka Consumer."""
    consumer = LibrdkafkaConsumer(dict(parse_config({**BASE, **extra}).data_plane))
    consumer.close()
