"""Real brokers that cannot run the consumer group protocol give a clear error, not a hang.

* Apache Kafka 3.6.2 predates ConsumerGroupHeartbeat: ApiVersions has no key 68.
* Apache Kafka 4.3.1 formatted with ``group.version=0`` advertises key 68 but answers a join
  with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator

import pytest

from consumer._runtime.cluster import ClusterClient
from consumer._runtime.connection import BrokerConnection
from consumer._wire import (
    ApiKey,
    NegotiatedVersions,
    build_heartbeat_request,
    parse_heartbeat_response,
)
from consumer.errors import UnsupportedBrokerError, UnsupportedVersionError
from consumer.member import HeartbeatRequest
from consumer.testing.real.broker import LocalBroker

pytestmark = pytest.mark.integration

LEGACY_KAFKA_VERSION = "3.6.2"


@pytest.fixture(scope="module")
def legacy_broker() -> Iterator[LocalBroker]:
    with LocalBroker(
        kafka_version=LEGACY_KAFKA_VERSION,
        allow_legacy_version=True,
        require_consumer_protocol=False,
    ) as broker:
        yield broker


@pytest.fixture(scope="module")
def broker_without_group_version() -> Iterator[LocalBroker]:
    with LocalBroker(
        format_features={"group.version": "0"}, require_consumer_protocol=False
    ) as broker:
        yield broker


def test_a_broker_older_than_4_0_is_refused_at_connect(legacy_broker: LocalBroker) -> None:
    async def connect() -> None:
        connection = BrokerConnection(
            "127.0.0.1",
            legacy_broker.port,
            required_apis=(ApiKey.CONSUMER_GROUP_HEARTBEAT,),
        )
        try:
            await connection.connect()
        finally:
            await connection.close()

    with pytest.raises(UnsupportedBrokerError, match="KIP-848") as caught:
        asyncio.run(asyncio.wait_for(connect(), timeout=30))
    assert "4.0" in str(caught.value)


def test_a_cluster_client_on_a_broker_older_than_4_0_fails_fast(legacy_broker: LocalBroker) -> None:
    async def start() -> None:
        async with ClusterClient(legacy_broker.bootstrap_servers) as cluster:
            await cluster.start()

    with pytest.raises(UnsupportedBrokerError, match="consumer group protocol"):
        asyncio.run(asyncio.wait_for(start(), timeout=30))


def test_a_join_on_a_broker_without_group_version_is_unsupported(
    broker_without_group_version: LocalBroker,
) -> None:
    async def join() -> None:
        fields = HeartbeatRequest(
            group_id=f"group-{uuid.uuid4().hex[:8]}",
            member_id=base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode(),
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=("anything",),
            topic_partitions=(),
        )

        def build(versions: NegotiatedVersions) -> object:
            return build_heartbeat_request(
                fields, versions.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT)
            )

        async with ClusterClient(broker_without_group_version.bootstrap_servers) as cluster:
            response = await cluster.coordinator_request(fields.group_id, build)  # type: ignore[arg-type]
            result = parse_heartbeat_response(response)
            assert result.error is not None
            raise result.error

    with pytest.raises(UnsupportedVersionError):
        asyncio.run(asyncio.wait_for(join(), timeout=30))
