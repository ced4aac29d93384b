"""The nodes of a :class:`~consumer.testing.real.cluster.LocalCluster`: their ids, their JVM
flags, each one's ``server.properties`` and the signals that stop them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from consumer.testing.real.broker import fast_group_settings
from consumer.testing.real.security import Listener

#: Node id of the first (or only) KRaft controller.
CONTROLLER_NODE_ID = 0
#: Node id of the second controller of a quorum; the third is 11, and so on (brokers are 1..9).
FIRST_EXTRA_CONTROLLER_ID = 10

# Several JVMs share the machine: small initial heaps, the broker's 512 MB cap, a smaller one for
# a controller (it holds only the metadata log).
_COMMON_JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
BROKER_JVM_FLAGS = ("-Xms64m", "-Xmx512m", *_COMMON_JVM_FLAGS)
CONTROLLER_JVM_FLAGS = ("-Xms32m", "-Xmx256m", *_COMMON_JVM_FLAGS)

# Liveness: a silent broker is fenced (and its leaderships moved) after 3 s instead of 9 s.
_LIVENESS = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}
_SMALL_THREAD_POOLS = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "log.cleaner.dedupe.buffer.size": "2097152",
}


@dataclass
class ClusterNode:
    """One JVM of the cluster: a broker or a controller."""

    node_id: int
    run_dir: Path
    port: int  # the PLAINTEXT listener of a broker, the CONTROLLER listener of a controller
    jvm_flags: tuple[str, ...]
    process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the JVM is alive (a paused one is)."""
        return self.process is not None and self.process.poll() is None


def controller_ids(controllers: int) -> list[int]:
    """Node ids of ``controllers`` KRaft controllers: 0, then 10, 11, ..."""
    extra = range(FIRST_EXTRA_CONTROLLER_ID, FIRST_EXTRA_CONTROLLER_ID + controllers - 1)
    return [CONTROLLER_NODE_ID, *extra]


def node_properties(
    node: ClusterNode,
    controllers: list[ClusterNode],
    brokers: int,
    overrides: Mapping[str, str],
    listeners: Sequence[Listener] = (),
) -> dict[str, str]:
    """The ``server.properties`` of ``node`` in a cluster of ``controllers`` (static voters) and
    ``brokers`` brokers; a broker binds ``listeners`` besides PLAINTEXT (which brokers use
    between themselves); ``overrides`` win over a broker's settings."""
    replicas, min_isr = str(min(3, brokers)), str(min(2, brokers))
    voters = ",".join(f"{c.node_id}@127.0.0.1:{c.port}" for c in controllers)
    common = {
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.run_dir / "data"),
        # The controller applies these to CreateTopics that leave them to the cluster.
        "num.partitions": "1",
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        **_LIVENESS,
        **_SMALL_THREAD_POOLS,
        # The controller validates group configs (IncrementalAlterConfigs on a GROUP) with
        # its own bounds, so it needs the fast group settings too.
        **fast_group_settings(),
    }
    if node in controllers:
        return {
            **common,
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
        }
    plaintext = f"PLAINTEXT://127.0.0.1:{node.port}"
    binds = [plaintext, *(f"{x.name}://127.0.0.1:{x.port}" for x in listeners)]
    adverts = [
        plaintext,
        *(f"{x.name}://127.0.0.1:{x.advertised_port or x.port}" for x in listeners),
    ]
    protocols = [common["listener.security.protocol.map"]]
    protocols += [f"{x.name}:{x.protocol}" for x in listeners]
    return {
        **common,
        "process.roles": "broker",
        "listeners": ",".join(binds),
        "advertised.listeners": ",".join(adverts),
        "listener.security.protocol.map": ",".join(protocols),
        "inter.broker.listener.name": "PLAINTEXT",
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        "share.coordinator.state.topic.num.partitions": "3",
        "auto.create.topics.enable": "true",
        "group.coordinator.threads": "1",
        **overrides,
    }


def terminate(node: ClusterNode, timeout_s: float) -> None:
    """SIGTERM ``node`` (resumed first if paused), SIGKILL after ``timeout_s``."""
    process = node.process
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def terminate_together(nodes: list[ClusterNode], timeout_s: float) -> None:
    """SIGTERM every node of ``nodes`` at once, SIGKILL those still running ``timeout_s`` later.

    One shared deadline instead of one per node: stopping a whole cluster one node after the
    other could take ``len(nodes) * timeout_s`` on a loaded machine (the last broker's controlled
    shutdown has nowhere to move its leaderships).
    """
    running = [n.process for n in nodes if n.process is not None and n.process.poll() is None]
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
        process.terminate()
    deadline_s = time.monotonic() + timeout_s
    for process in running:
        try:
            process.wait(timeout=max(0.0, deadline_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def rss_kib(node: ClusterNode) -> int | None:
    """Resident memory of ``node``'s running JVM in KiB (None if it is not running)."""
    if not node.running or node.process is None:
        return None
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{node.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None
