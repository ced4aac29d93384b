"""Cluster tier: a real three-broker Kafka cluster (one KRaft controller besides), started once
for this folder, where tests kill, stop and pause brokers while members work.

The cluster is always this folder's own, even when ``KAFKA_BOOTSTRAP_SERVERS`` names an existing
one: its tests kill brokers. Every test gets the cluster healthy: brokers a test killed or
stopped are restarted and paused ones resumed after it, so the tests stay independent.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.testing.real.cluster import LocalCluster
from consumer.testing.real.proxied_cluster import ProxiedCluster

BROKERS = 3
#: A quorum, so that the active controller can be killed (two more small JVMs, same start time).
CONTROLLERS = 3

# The reliability tier's fleet, checks and churn are plain modules of tests/reliability.
_RELIABILITY = str(Path(__file__).resolve().parents[1] / "reliability")
if _RELIABILITY not in sys.path:
    sys.path.insert(0, _RELIABILITY)


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[ProxiedCluster]:
    """The folder's cluster: three brokers, RF 3 and ``min.insync.replicas=2`` everywhere, a
    quorum of three KRaft controllers, and a fault proxy in front of each broker for members
    that bootstrap on ``member_bootstrap_servers`` (idle for the others)."""
    started = time.monotonic()
    with ProxiedCluster(brokers=BROKERS, controllers=CONTROLLERS) as cluster:
        print(  # noqa: T201 - start time and memory of the tier's cluster, for the CI log
            f"\nLocalCluster({BROKERS}, controllers={CONTROLLERS}) ready in "
            f"{time.monotonic() - started:.1f} s; "
            f"RSS KiB by node {cluster.rss_kib()}"
        )
        yield cluster


@pytest.fixture
def cluster(local_cluster: ProxiedCluster) -> Iterator[ProxiedCluster]:
    """The session cluster, every node brought back (restarted or resumed) and every proxy
    healed after the test."""
    yield local_cluster
    local_cluster.heal_all()
    for node_id in [*local_cluster.controller_ids, *local_cluster.broker_ids]:
        if local_cluster.is_running(node_id):
            local_cluster.resume(node_id)  # no effect on a broker that was not paused
        else:
            local_cluster.restart(node_id)


@pytest.fixture
def cluster_admin(local_cluster: LocalCluster) -> AdminClient:
    """An admin client on every broker of the cluster."""
    return AdminClient({"bootstrap.servers": local_cluster.bootstrap_servers})


@pytest.fixture
def replicated_topic(cluster: LocalCluster, cluster_admin: AdminClient) -> Callable[[int], str]:
    """``replicated_topic(partitions)`` -> a new topic with replication factor 3, every
    partition led by a broker the metadata names."""

    def make(partitions: int) -> str:
        topic = f"replicated-{uuid.uuid4().hex[:10]}"
        future = cluster_admin.create_topics([NewTopic(topic, partitions, BROKERS)])[topic]
        future.result(30)
        deadline = time.monotonic() + 30
        while any(cluster.leader_of(topic, p) < 0 for p in range(partitions)):
            assert time.monotonic() < deadline, f"{topic} has a partition without a leader"
            time.sleep(0.2)  # leadership is announced to no one: ask the metadata again
        return topic

    return make


@pytest.fixture
def make_cluster_fleet(
    cluster: ProxiedCluster,
    replicated_topic: Callable[[int], str],
    tmp_path: Path,
) -> Iterator[Callable[..., tuple[Any, Any]]]:
    """``make_cluster_fleet(partitions, proxied_slots=(), **member_defaults)`` -> the
    reliability tier's ``Fleet`` of member processes on a new replicated topic and group of the
    cluster (members of ``proxied_slots`` reach the brokers through their proxies), and its
    ``ClusterProducedLog`` (``acks=all``, idempotent). Members left running are killed at
    teardown."""
    from cluster_fleet import ClusterFleet, ClusterProducedLog, ClusterTarget

    made: list[ClusterFleet] = []

    def make(
        partitions: int, proxied_slots: tuple[str, ...] = (), **defaults: object
    ) -> tuple[ClusterFleet, ClusterProducedLog]:
        topic = replicated_topic(partitions)
        group = f"group-{uuid.uuid4().hex[:10]}"
        target = ClusterTarget(cluster, tmp_path, proxied_slots)
        fleet = ClusterFleet(target, tmp_path, topic, group, partitions, **defaults)  # type: ignore[arg-type]
        made.append(fleet)
        return fleet, ClusterProducedLog(cluster.bootstrap_servers, topic, partitions)

    yield make
    for fleet in made:
        for member in fleet.members:
            member.ensure_dead()
