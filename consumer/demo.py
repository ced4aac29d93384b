"""The README's main job: join a consumer group at the wire level and print the assignment.

It starts the local Kafka broker (unless a cluster is given), creates a 3-partition topic, then
speaks ConsumerGroupHeartbeat itself: a join at epoch 0, heartbeats at the interval the
coordinator asks for, acknowledging what it owns, until all three partitions are assigned; then it
prints the member's epoch and partitions and leaves the group with epoch -1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping

from consumer._runtime.cluster import ClusterClient
from consumer._wire import (
    LEAVE_GROUP_EPOCH,
    ApiKey,
    HeartbeatFields,
    HeartbeatResult,
    NegotiatedVersions,
    build_heartbeat_request,
    parse_heartbeat_response,
)
from consumer.testing.broker import LocalBroker

DEMO_PARTITIONS = 3
CONVERGE_TIMEOUT_S = 60.0


@contextlib.contextmanager
def _cluster_address(bootstrap_servers: str | None) -> Iterator[str]:
    address = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if address:
        yield address
        return
    print("starting the local Kafka broker ...", flush=True)
    with LocalBroker() as broker:
        print(f"bootstrap.servers={broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers


def _create_topic(bootstrap_servers: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, num_partitions=DEMO_PARTITIONS)])
    futures[topic].result(timeout=30)


async def _heartbeat(cluster: ClusterClient, fields: HeartbeatFields) -> HeartbeatResult:
    def build(versions: NegotiatedVersions) -> object:
        return build_heartbeat_request(
            fields, versions.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        )

    response = await cluster.coordinator_request(fields.group_id, build)  # type: ignore[arg-type]
    result = parse_heartbeat_response(response)
    if result.error is not None:
        raise result.error
    return result


def _describe(
    assignment: Mapping[uuid.UUID, frozenset[int]], names: Mapping[uuid.UUID, str]
) -> str:
    parts = [
        f"{names.get(topic_id, str(topic_id))}-{p}"
        for topic_id, partitions in assignment.items()
        for p in sorted(partitions)
    ]
    return ", ".join(parts) or "(none)"


async def _join_and_print(bootstrap_servers: str, topic: str, group_id: str) -> None:
    async with ClusterClient(bootstrap_servers, client_id="kgm-demo") as cluster:
        snapshot = await cluster.metadata([topic])
        names = snapshot.topic_names_by_id()
        member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        result = await _heartbeat(
            cluster,
            HeartbeatFields(
                group_id=group_id,
                member_id=member_id,
                member_epoch=0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=[topic],
                owned_partitions={},
            ),
        )
        epoch, owned = result.member_epoch, dict(result.assignment or {})
        print(f"joined group {group_id} as {member_id}: epoch {epoch}", flush=True)
        while sum(len(p) for p in owned.values()) < DEMO_PARTITIONS:
            # The coordinator sets the heartbeat interval; follow it.
            await asyncio.sleep(result.heartbeat_interval_ms / 1000)
            result = await _heartbeat(
                cluster,
                HeartbeatFields(
                    group_id=group_id,
                    member_id=member_id,
                    member_epoch=epoch,
                    owned_partitions=owned,
                ),
            )
            epoch = result.member_epoch
            if result.assignment is not None:
                owned = dict(result.assignment)
            print(f"  epoch {epoch}: assigned {_describe(owned, names)}", flush=True)
        print(f"assignment of {member_id}: {_describe(owned, names)} (epoch {epoch})", flush=True)
        await _heartbeat(
            cluster,
            HeartbeatFields(group_id=group_id, member_id=member_id, member_epoch=LEAVE_GROUP_EPOCH),
        )
        print("left the group", flush=True)


def run_demo(bootstrap_servers: str | None = None) -> int:
    """Start (or use) a broker, join a group at the wire level and print the assignment."""
    suffix = uuid.uuid4().hex[:6]
    topic, group_id = f"demo-{suffix}", f"demo-group-{suffix}"
    with _cluster_address(bootstrap_servers) as address:
        _create_topic(address, topic)
        print(f"created topic {topic} with {DEMO_PARTITIONS} partitions", flush=True)
        asyncio.run(asyncio.wait_for(_join_and_print(address, topic, group_id), CONVERGE_TIMEOUT_S))
    return 0
