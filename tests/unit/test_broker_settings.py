"""Launcher settings that need no JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumer.testing.real.broker import (
    LocalBroker,
    fast_group_settings,
    fast_share_group_settings,
)
from consumer.testing.real.kafka_jars import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
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


def test_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from consumer.testing.real import broker

    # The first draw encodes to an id starting with '-' (0xf8 -> '-' in URL-safe base64).
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=7)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    cluster_id = broker._new_cluster_id()
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22


def test_a_failed_start_is_tried_again_on_fresh_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []

    def fail_twice(self: LocalBroker) -> LocalBroker:
        attempts.append(self.port)
        if len(attempts) < 3:
            self.port = 40000 + len(attempts)  # as if a port had been picked and lost
            raise BrokerStartError("the port was taken")
        return self

    monkeypatch.setattr(LocalBroker, "_start_once", fail_twice)
    broker = LocalBroker()
    assert broker.start() is broker
    assert attempts == [0, 0, 0], "each attempt picks new ports"


def test_a_broker_on_a_fixed_port_is_tried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fail(self: LocalBroker) -> LocalBroker:
        calls.append(1)
        raise BrokerStartError("the port was taken")

    monkeypatch.setattr(LocalBroker, "_start_once", fail)
    with pytest.raises(BrokerStartError):
        LocalBroker(port=45678).start()
    assert calls == [1]


def test_every_local_broker_gets_the_fast_share_group_settings(tmp_path: Path) -> None:
    share = fast_share_group_settings()
    assert set(share) <= set(fast_group_settings())
    props = LocalBroker(run_dir=tmp_path, port=9999).server_properties(controller_port=9998)
    for key, value in share.items():
        assert props[key] == value
    assert all(key.startswith("group.share.") for key in share)
    # Groups may lower their record lock to 1 s; the broker-wide default stays Kafka's.
    assert share["group.share.min.record.lock.duration.ms"] == "1000"
    assert "group.share.record.lock.duration.ms" not in props
    assert int(share["group.share.heartbeat.interval.ms"]) <= 500
