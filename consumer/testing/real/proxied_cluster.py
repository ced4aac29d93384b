"""A :class:`~consumer.testing.real.cluster.LocalCluster` whose brokers members reach through a
:class:`~consumer.testing.real.proxy.FaultProxy` each, so that one broker can be cut off from the
members while the rest of the cluster still sees it.

Every broker binds a second listener, ``MEMBERS``, advertised at its proxy's port: a client that
bootstraps through the proxies (:attr:`ProxiedCluster.member_bootstrap_servers`) learns the
proxies' addresses from Metadata and FindCoordinator and keeps using them, for the group
coordinator and the partition leaders alike. Brokers talk to each other and to the controllers
on their PLAINTEXT listeners, which no proxy is in front of, and a client that bootstraps on
:attr:`~consumer.testing.real.cluster.LocalCluster.bootstrap_servers` (producers, admin work)
bypasses the proxies too::

    with ProxiedCluster(brokers=3) as cluster:
        consumer = Consumer({"bootstrap.servers": cluster.member_bootstrap_servers, ...})
        cluster.proxy(cluster.coordinator_of("orders")).blackhole()   # members lose it

The proxies pass whole Kafka frames, so :meth:`FaultProxy.answer_with_error` works on them: the
coordinator's proxy can answer the members' heartbeats with COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from consumer.testing.real._jvm_node import free_port
from consumer.testing.real.cluster import LocalCluster
from consumer.testing.real.proxy import FaultProxy
from consumer.testing.real.security import Listener

__all__ = ["MEMBERS_LISTENER", "ProxiedCluster"]

#: The listener members reach each broker on, through that broker's proxy.
MEMBERS_LISTENER = "MEMBERS"


@dataclass
class ProxiedCluster(LocalCluster):
    """:class:`LocalCluster` plus one :class:`FaultProxy` in front of each broker's ``MEMBERS``
    listener (same fields; ``broker_listeners`` is taken by the proxies)."""

    _proxies: dict[int, FaultProxy] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.broker_listeners:
            raise ValueError("ProxiedCluster sets broker_listeners itself; leave it empty")
        super().__post_init__()
        listeners: dict[int, tuple[Listener, ...]] = {}
        for node_id in self.broker_ids:
            listener_port = free_port()
            proxy = FaultProxy(
                ("127.0.0.1", listener_port),
                listen_port=free_port(),
                name=f"broker-{node_id}",
                kafka_frames=True,
            )
            self._proxies[node_id] = proxy
            listeners[node_id] = (
                Listener(MEMBERS_LISTENER, "PLAINTEXT", listener_port, proxy.address[1]),
            )
        self.broker_listeners = listeners

    @property
    def member_bootstrap_servers(self) -> str:
        """Every broker's proxy, comma-separated: the ``bootstrap.servers`` of members."""
        return ",".join(self._proxies[n].bootstrap_servers for n in self.broker_ids)

    def proxy(self, node_id: int) -> FaultProxy:
        """The fault controls of the members' path to broker ``node_id``."""
        if node_id not in self._proxies:
            raise ValueError(f"node_id must be a broker id {self.broker_ids}, got {node_id!r}")
        return self._proxies[node_id]

    def heal_all(self) -> None:
        """End every proxy's blackhole or drop (delays are kept)."""
        for proxy in self._proxies.values():
            proxy.heal()

    def start(self) -> Self:
        """Start the proxies, then the cluster (the proxies' ports are already fixed)."""
        try:
            for proxy in self._proxies.values():
                proxy.start()
            super().start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, node_id: int | None = None) -> None:
        """As :meth:`LocalCluster.stop`; without ``node_id`` the proxies stop too."""
        super().stop(node_id)
        if node_id is None:
            for proxy in self._proxies.values():
                proxy.stop()
