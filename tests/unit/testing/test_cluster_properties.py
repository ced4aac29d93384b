"""LocalCluster's node settings without starting a JVM: the controller quorum's voters, the
listeners a broker binds besides PLAINTEXT, and the arguments it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumer.testing.real._cluster_nodes import ClusterNode, controller_ids, node_properties
from consumer.testing.real.cluster import LocalCluster
from consumer.testing.real.proxied_cluster import MEMBERS_LISTENER, ProxiedCluster
from consumer.testing.real.security import Listener


def _nodes(tmp_path: Path, ids: list[int]) -> list[ClusterNode]:
    return [ClusterNode(i, tmp_path / str(i), 7000 + i, ()) for i in ids]


def test_a_quorum_of_three_lists_every_controller_as_a_voter(tmp_path: Path) -> None:
    assert controller_ids(3) == [0, 10, 11]
    controllers = _nodes(tmp_path, controller_ids(3))
    (broker,) = _nodes(tmp_path, [1])
    voters = "0@127.0.0.1:7000,10@127.0.0.1:7010,11@127.0.0.1:7011"
    for node in (*controllers, broker):
        props = node_properties(node, controllers, 3, {})
        assert props["controller.quorum.voters"] == voters
    assert node_properties(controllers[1], controllers, 3, {})["process.roles"] == "controller"


def test_a_broker_binds_extra_listeners_advertised_elsewhere(tmp_path: Path) -> None:
    controllers = _nodes(tmp_path, [0])
    (broker,) = _nodes(tmp_path, [2])
    extra = Listener("MEMBERS", "PLAINTEXT", 8002, 9002)
    props = node_properties(broker, controllers, 3, {"num.io.threads": "4"}, [extra])
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:7002,MEMBERS://127.0.0.1:8002"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:7002,MEMBERS://127.0.0.1:9002"
    assert "MEMBERS:PLAINTEXT" in props["listener.security.protocol.map"].split(",")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["num.io.threads"] == "4", "overrides win"


def test_bad_arguments_name_the_field_and_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="controllers must be 1, 3 or 5, got 2"):
        LocalCluster(controllers=2)
    with pytest.raises(ValueError, match=r"broker_overrides keys must be broker ids \[1, 2, 3\]"):
        LocalCluster(broker_overrides={7: {"a": "b"}})
    with pytest.raises(ValueError, match="sets broker_listeners itself"):
        ProxiedCluster(broker_listeners={1: ()})


def test_a_proxied_cluster_puts_a_proxy_before_each_brokers_members_listener() -> None:
    cluster = ProxiedCluster(brokers=2)
    assert set(cluster.broker_listeners) == {1, 2}
    for node_id, (listener,) in cluster.broker_listeners.items():
        proxy = cluster.proxy(node_id)
        assert listener.name == MEMBERS_LISTENER
        assert proxy.upstream == ("127.0.0.1", listener.port)
        assert listener.advertised_port == proxy.address[1]
    assert cluster.member_bootstrap_servers.count(",") == 1
    with pytest.raises(ValueError, match="node_id must be a broker id"):
        cluster.proxy(0)
