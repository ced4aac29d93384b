"""A loopback TCP proxy with faults you switch at run time, one per group member.

:class:`FaultProxy` forwards bytes between clients and one upstream address (a broker
listener) on an asyncio loop in its own thread. Its faults can be changed from any thread:

* ``delay(ms)``: every chunk, in both directions, is forwarded ``ms`` milliseconds after it
  arrived (latency is added; throughput is not capped, order is kept);
* ``blackhole()``: connections stay open and new ones are accepted, but nothing is forwarded
  either way (closes included) until ``heal()``, so requests time out. Bytes already sent are
  held, as TCP would retransmit them, and flow again after ``heal()``;
* ``drop()``: every connection is reset (RST) at once, and new ones are accepted and reset
  immediately, until ``heal()``;
* ``answer_with_error(api_key, error_code)`` (with ``kafka_frames=True``): heartbeats are answered
  by the proxy with that error and never reach the broker, e.g. COORDINATOR_LOAD_IN_PROGRESS;
* ``heal()``: no fault (the delay is kept; ``delay(0)`` removes it).

A Kafka client learns broker addresses from Metadata, so a proxy in front of a broker only stays
in the path if the broker *advertises* the proxy. :class:`ProxiedBroker` does that for each
member: one :class:`~consumer.testing.real.broker.LocalBroker` gets one extra PLAINTEXT listener per
member, each advertised at that member's proxy; a client bootstrapping to the member's proxy
reaches that listener and is told (Metadata, FindCoordinator) to keep using the same proxy::

    with proxied_broker(["m1", "m2"]) as cluster:
        c1 = Consumer({"bootstrap.servers": cluster.bootstrap_servers("m1"), ...})
        c2 = Consumer({"bootstrap.servers": cluster.bootstrap_servers("m2"), ...})
        cluster.proxy("m1").blackhole()     # only m1 is cut off
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

from consumer.testing.real._fault_proxy import FaultProxy, ProxyStats
from consumer.testing.real._service import Service
from consumer.testing.real.broker import LocalBroker, free_port
from consumer.testing.real.security import Listener, listener_overrides

__all__ = ["FaultProxy", "ProxiedBroker", "ProxyStats", "proxied_broker"]


# ----------------------------------------------------------------------------------------------
# One broker, one proxied listener per member


def _listener_name(member: str) -> str:
    return "M_" + re.sub(r"[^A-Z0-9]", "_", member.upper())


class ProxiedBroker(Service):
    """A :class:`LocalBroker` with one listener per member, each behind its own FaultProxy.

    Listener ``M_<MEMBER>`` binds a free port and is advertised at the member's proxy port, so a
    client that bootstraps through the proxy keeps talking through it. The PLAINTEXT listener
    (``broker.bootstrap_servers``, also :attr:`direct_bootstrap_servers`) bypasses every proxy:
    use it for admin work and producers that must not be disturbed. ``broker_fields`` are
    passed to :class:`LocalBroker` (``overrides`` are applied on top of the listener settings).
    """

    def __init__(self, members: Sequence[str], **broker_fields: Any) -> None:
        names = [_listener_name(member) for member in members]
        if not members or len(set(names)) != len(names):
            raise ValueError(f"need distinct member names, got {list(members)}")
        self.proxies: dict[str, FaultProxy] = {}
        listeners: list[Listener] = []
        for member, name in zip(members, names, strict=True):
            listener_port = free_port()
            proxy = FaultProxy(("127.0.0.1", listener_port), listen_port=free_port(), name=member)
            self.proxies[member] = proxy
            listeners.append(Listener(name, "PLAINTEXT", listener_port, proxy.address[1]))
        port = free_port()
        extra: Mapping[str, str] = broker_fields.pop("overrides", {})
        overrides = {**listener_overrides(port, free_port(), listeners), **extra}
        self.broker = LocalBroker(port=port, overrides=overrides, **broker_fields)

    @property
    def direct_bootstrap_servers(self) -> str:
        """The broker's own PLAINTEXT listener, bypassing every proxy."""
        return self.broker.bootstrap_servers

    def proxy(self, member: str) -> FaultProxy:
        """The fault controls of ``member``'s path to the broker."""
        return self.proxies[member]

    def bootstrap_servers(self, member: str) -> str:
        """What ``member`` uses as ``bootstrap.servers``: its proxy."""
        return self.proxies[member].bootstrap_servers

    def start(self) -> Self:
        """Start the proxies, then the broker (its ports are already fixed)."""
        try:
            for proxy in self.proxies.values():
                proxy.start()
            self.broker.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the broker and every proxy."""
        self.broker.stop()
        for proxy in self.proxies.values():
            proxy.stop()


@contextlib.contextmanager
def proxied_broker(members: Sequence[str], **broker_fields: Any) -> Iterator[ProxiedBroker]:
    """Context manager: a started :class:`ProxiedBroker` for ``members``."""
    with ProxiedBroker(members, **broker_fields) as cluster:
        yield cluster
