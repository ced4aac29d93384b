"""Real-broker tooling: a Kafka broker started from Maven Central jars (a JVM process), a
three-broker cluster of such JVMs for leader, coordinator and controller moves (``LocalCluster``;
``ProxiedCluster`` puts a fault proxy in front of each of its brokers), the fault proxy between
members and the broker (sockets), and TLS/SASL set-up.

``consumer.testing.real.security`` needs ``cryptography`` (the ``testing`` extra); it is not
imported
here, so that the rest works without it.
"""

from consumer.testing.real.broker import (
    LocalBroker,
    fast_group_settings,
    fast_share_group_settings,
    running_broker,
)
from consumer.testing.real.cluster import LocalCluster, running_cluster
from consumer.testing.real.detached import DetachedBroker, read_broker_state, stop_detached_broker
from consumer.testing.real.kafka_jars import DEFAULT_KAFKA_VERSION, BrokerStartError
from consumer.testing.real.proxied_cluster import ProxiedCluster
from consumer.testing.real.proxy import FaultProxy, ProxiedBroker, ProxyStats, proxied_broker

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "BrokerStartError",
    "DetachedBroker",
    "FaultProxy",
    "LocalBroker",
    "LocalCluster",
    "ProxiedBroker",
    "ProxiedCluster",
    "ProxyStats",
    "fast_group_settings",
    "fast_share_group_settings",
    "proxied_broker",
    "read_broker_state",
    "running_broker",
    "running_cluster",
    "stop_detached_broker",
]
