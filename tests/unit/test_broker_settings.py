"""Launcher settings that need no JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumer.testing.broker import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    LocalBroker,
    fast_group_settings,
    resolve_kafka_jars,
)


def test_default_version_is_a_4x_release() -> None:
    assert DEFAULT_KAFKA_VERSION.split(".")[0] == "4"


@pytest.mark.parametrize("version", ["3.9.1", "2.8.0", "latest", "4"])
def test_versions_without_the_consumer_protocol_are_refused(version: str) -> None:
    with pytest.raises(BrokerStartError, match="4.x"):
        resolve_kafka_jars(version)


def test_server_properties_make_groups_fast_and_overrides_win(tmp_path: Path) -> None:
    broker = LocalBroker(
        run_dir=tmp_path,
        port=9999,
        overrides={"group.consumer.session.timeout.ms": "4500"},
    )
    props = broker.server_properties(controller_port=9998)
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:9999,CONTROLLER://127.0.0.1:9998")
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9998"
    assert props["group.consumer.heartbeat.interval.ms"] == "500"
    assert props["group.consumer.session.timeout.ms"] == "4500"
    assert int(fast_group_settings()["group.consumer.min.heartbeat.interval.ms"]) <= 500
    assert broker.bootstrap_servers == "127.0.0.1:9999"
