"""A local Apache Kafka 4.x cluster: one KRaft controller and several brokers, each its own JVM.

:class:`LocalCluster` is :class:`~consumer.testing.real.broker.LocalBroker`'s multi-node sibling,
for tests where a broker dies while members work: a partition leader or a group coordinator is
killed (SIGKILL), stopped (SIGTERM, a controlled shutdown), paused (SIGSTOP) and brought back,
and the data stays available because every topic, ``__consumer_offsets`` and
``__share_group_state`` included, is replicated three times with ``min.insync.replicas=2``.

The controller is a node of its own (node id 0) rather than a role of the first broker: killing
any broker then never takes the quorum down with it, so a test can kill whichever broker leads
the partition or coordinates the group it is watching. The controller-only JVM is small (no log
manager, no group coordinators) and starts in parallel with the brokers, so it costs little
start time on a two-core machine. Brokers heartbeat every 500 ms and are fenced after 3 s of
silence, so a killed leader is replaced within a few seconds.

Typical use::

    with LocalCluster(brokers=3) as cluster:
        leader = cluster.leader_of("orders", 0)
        cluster.kill(leader)
        ...
        cluster.restart(leader)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self, TypeVar

from consumer._runtime.cluster import ClusterClient
from consumer.testing.real._jvm_node import (
    format_storage,
    free_port,
    launch_jvm,
    log_options,
    log_tail,
    wait_serving,
    write_run_files,
)
from consumer.testing.real._service import Service
from consumer.testing.real.broker import _new_cluster_id, fast_group_settings
from consumer.testing.real.kafka_jars import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    resolve_kafka_jars,
)

__all__ = ["LocalCluster", "running_cluster"]

CONTROLLER_NODE_ID = 0

_T = TypeVar("_T")

# Four JVMs share the machine: small initial heaps, the broker's 512 MB cap, a smaller one for
# the controller (it holds only the metadata log).
_COMMON_JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
_BROKER_JVM_FLAGS = ("-Xms64m", "-Xmx512m", *_COMMON_JVM_FLAGS)
_CONTROLLER_JVM_FLAGS = ("-Xms32m", "-Xmx256m", *_COMMON_JVM_FLAGS)

# Liveness: a silent broker is fenced (and its leaderships moved) after 3 s instead of 9 s.
_LIVENESS = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}
_SMALL_THREAD_POOLS = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "log.cleaner.dedupe.buffer.size": "2097152",
}


@dataclass
class _Node:
    node_id: int
    run_dir: Path
    port: int  # the PLAINTEXT listener of a broker, the CONTROLLER listener of the controller
    jvm_flags: tuple[str, ...]
    process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class LocalCluster(Service):
    """``brokers`` Kafka brokers and one KRaft controller on 127.0.0.1, each its own JVM.

    Topics are created with replication factor ``min(3, brokers)`` and
    ``min.insync.replicas=min(2, brokers)`` unless a test says otherwise, and so are the
    internal ``__consumer_offsets`` (3 partitions) and ``__share_group_state`` topics. Every
    broker has :func:`~consumer.testing.real.broker.fast_group_settings`. ``overrides`` are
    added to (and win over) every broker's ``server.properties``.

    Per-broker faults take a broker's node id (1 .. ``brokers``): :meth:`kill` (SIGKILL),
    :meth:`stop` (SIGTERM: a controlled shutdown), :meth:`pause` / :meth:`resume`
    (SIGSTOP / SIGCONT) and :meth:`restart` (on the same data and port).
    """

    brokers: int = 3
    kafka_version: str = field(
        default_factory=lambda: os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    )
    overrides: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 120.0
    stop_timeout_s: float = 15.0
    bind_to_parent: bool = True
    _root: Path | None = field(default=None, init=False, repr=False)
    _nodes: dict[int, _Node] = field(default_factory=dict, init=False, repr=False)
    # Every JVM is launched from this one thread: with ``bind_to_parent`` Linux kills a JVM when
    # the *thread* that forked it ends (PR_SET_PDEATHSIG), so a broker restarted from a test's
    # worker thread would otherwise die with that thread.
    _launcher: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= 9:
            raise ValueError(f"brokers must be between 1 and 9, got {self.brokers!r}")

    @property
    def broker_ids(self) -> list[int]:
        """Node ids of the brokers: 1 .. ``brokers``."""
        return list(range(1, self.brokers + 1))

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of every broker, comma-separated."""
        return ",".join(self.address_of(node_id) for node_id in self.broker_ids)

    def address_of(self, node_id: int) -> str:
        """``127.0.0.1:PORT`` of broker ``node_id``."""
        return f"127.0.0.1:{self._broker(node_id).port}"

    def is_running(self, node_id: int) -> bool:
        """Whether broker ``node_id``'s JVM is alive (a paused one is)."""
        return self._broker(node_id).running

    def running_bootstrap_servers(self) -> str:
        """``bootstrap_servers`` of the brokers whose JVM is alive."""
        return ",".join(self.address_of(n) for n in self.broker_ids if self.is_running(n))

    def server_properties(self, node_id: int) -> dict[str, str]:
        """The full ``server.properties`` node ``node_id`` (0: the controller) starts with."""
        controller = self._nodes[CONTROLLER_NODE_ID]
        replicas, min_isr = str(min(3, self.brokers)), str(min(2, self.brokers))
        common = {
            "node.id": str(node_id),
            "controller.quorum.voters": f"{CONTROLLER_NODE_ID}@127.0.0.1:{controller.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self._nodes[node_id].run_dir / "data"),
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
        if node_id == CONTROLLER_NODE_ID:
            return {
                **common,
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{controller.port}",
            }
        listener = f"PLAINTEXT://127.0.0.1:{self._nodes[node_id].port}"
        return {
            **common,
            "process.roles": "broker",
            "listeners": listener,
            "advertised.listeners": listener,
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
            **self.overrides,
        }

    def start(self) -> Self:
        """Format every node's storage with one cluster id, start all JVMs at once and return
        when every broker answers ApiVersions with key 68 and is registered (unfenced)."""
        if self._nodes:
            raise BrokerStartError("this LocalCluster was already started")
        lib_dir = resolve_kafka_jars(self.kafka_version)
        self._root = Path(tempfile.mkdtemp(prefix="kgm-cluster-"))
        node_ids = [CONTROLLER_NODE_ID, *self.broker_ids]
        for node_id in node_ids:
            flags = _CONTROLLER_JVM_FLAGS if node_id == CONTROLLER_NODE_ID else _BROKER_JVM_FLAGS
            self._nodes[node_id] = _Node(node_id, self._root / f"node-{node_id}", 0, flags)
        for node in self._nodes.values():
            node.port = free_port()
        cluster_id = _new_cluster_id()
        try:
            with ThreadPoolExecutor(max_workers=len(node_ids)) as pool:
                formats = [
                    pool.submit(self._format, lib_dir, node_id, cluster_id) for node_id in node_ids
                ]
                for done in formats:
                    done.result()
            for node_id in node_ids:
                self._launch(lib_dir, node_id, append_stdout=False)
            for node_id in self.broker_ids:
                self._wait_serving(node_id)
            self._wait_registered(set(self.broker_ids))
        except BaseException:
            self.stop()
            raise
        return self

    def _format(self, lib_dir: Path, node_id: int, cluster_id: str) -> None:
        run_dir = self._nodes[node_id].run_dir
        props_path = write_run_files(run_dir, self.server_properties(node_id))
        format_storage(lib_dir, props_path, cluster_id, log_options(run_dir))

    def _launch(self, lib_dir: Path, node_id: int, *, append_stdout: bool) -> None:
        node = self._nodes[node_id]
        if self._launcher is None:
            self._launcher = ThreadPoolExecutor(1, thread_name_prefix="kgm-cluster-launcher")
        node.process = self._launcher.submit(
            launch_jvm,
            lib_dir,
            node.run_dir,
            log_options(node.run_dir),
            node.jvm_flags,
            append_stdout=append_stdout,
            bind_to_parent=self.bind_to_parent,
        ).result()

    def _wait_serving(self, node_id: int) -> None:
        node = self._broker(node_id)
        assert node.process is not None
        wait_serving(node.process, node.port, self.ready_timeout_s, lambda: self.log_tail(node_id))

    def _wait_registered(self, node_ids: set[int]) -> None:
        """Wait until the metadata lists ``node_ids`` (a fenced broker is not listed)."""
        deadline = time.monotonic() + self.ready_timeout_s
        listed: set[int] = set()
        while not node_ids <= listed:
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"brokers {sorted(node_ids - listed)} were not registered within "
                    f"{self.ready_timeout_s:.0f} s; controller log:\n"
                    f"{self.log_tail(CONTROLLER_NODE_ID)}"
                )
            listed = set(self._with_client(lambda client: _listed_brokers(client)))
            if not node_ids <= listed:
                time.sleep(0.2)  # the controller announces nothing: ask again shortly

    def _broker(self, node_id: int) -> _Node:
        if node_id not in self.broker_ids:
            raise ValueError(f"node_id must be a broker id {self.broker_ids}, got {node_id!r}")
        if node_id not in self._nodes:
            raise BrokerStartError("the cluster was not started")
        return self._nodes[node_id]

    def kill(self, node_id: int) -> None:
        """SIGKILL broker ``node_id`` (a crash: no controlled shutdown); its data is kept."""
        node = self._broker(node_id)
        if node.process is not None and node.process.poll() is None:
            node.process.kill()
            node.process.wait(timeout=10)

    def stop(self, node_id: int | None = None) -> None:
        """SIGTERM broker ``node_id`` (a controlled shutdown: its leaderships move first),
        SIGKILL after ``stop_timeout_s``; its data is kept for :meth:`restart`.

        Without ``node_id``: stop every node and remove the cluster's data (safe to call
        more than once).
        """
        if node_id is not None:
            _terminate(self._broker(node_id), self.stop_timeout_s)
            return
        # Brokers first, so their controlled shutdowns still find the controller.
        for node in sorted(self._nodes.values(), key=lambda n: n.node_id == CONTROLLER_NODE_ID):
            _terminate(node, self.stop_timeout_s)
        self._nodes.clear()
        if self._launcher is not None:
            self._launcher.shutdown()
            self._launcher = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def pause(self, node_id: int) -> None:
        """SIGSTOP broker ``node_id``: it keeps its sockets but answers nothing."""
        self._signal(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        """SIGCONT broker ``node_id`` after :meth:`pause`."""
        self._signal(node_id, signal.SIGCONT)

    def _signal(self, node_id: int, signum: signal.Signals) -> None:
        node = self._broker(node_id)
        if not node.running:
            raise BrokerStartError(f"broker {node_id} is not running")
        assert node.process is not None
        os.kill(node.process.pid, signum)

    def restart(self, node_id: int) -> None:
        """Start broker ``node_id`` again on its data and port (stopping it first if it runs);
        returns once it serves and the controller lists it again."""
        node = self._broker(node_id)
        _terminate(node, self.stop_timeout_s)
        self._launch(resolve_kafka_jars(self.kafka_version), node_id, append_stdout=True)
        self._wait_serving(node_id)
        self._wait_registered({node_id})

    def leader_of(self, topic: str, partition: int) -> int:
        """Node id of the current leader of ``topic``/``partition`` from a fresh Metadata
        request to a running broker; -1 while there is none (or the metadata does not list the
        partition yet)."""

        async def ask(client: ClusterClient) -> int:
            snapshot = await client.metadata([topic])
            for listed in snapshot.topics:
                if listed.name == topic and partition in listed.partitions:
                    return listed.partitions[partition].leader_id
            return -1

        return self._with_client(ask)

    def coordinator_of(self, group_id: str) -> int:
        """Node id of the broker coordinating ``group_id`` (consumer and share groups alike),
        from a fresh FindCoordinator request."""

        async def ask(client: ClusterClient) -> int:
            return (await client.find_coordinator(group_id, refresh=True)).node_id

        return self._with_client(ask)

    def _with_client(self, call: Callable[[ClusterClient], Awaitable[_T]]) -> _T:
        async def run() -> _T:
            client = ClusterClient(self.running_bootstrap_servers(), client_id="kgm-local-cluster")
            try:
                return await call(client)
            finally:
                await client.close()

        return asyncio.run(run())

    def wait_for_exit(self, poll_interval_s: float = 0.5) -> int:
        """Block until one node's JVM exits by itself (a killed or stopped one counts too) and
        return its node id (0: the controller): a foreground cluster's main loop."""
        while True:
            for node_id, node in self._nodes.items():
                if not node.running:
                    return node_id
            time.sleep(poll_interval_s)  # a JVM announces its exit to no one: look again

    def rss_kib(self) -> dict[int, int]:
        """Resident memory of each running node's JVM in KiB, by node id (0: the controller)."""
        sizes: dict[int, int] = {}
        for node_id, node in self._nodes.items():
            if node.running and node.process is not None:
                status = Path(f"/proc/{node.process.pid}/status")
                with contextlib.suppress(OSError):
                    for line in status.read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            sizes[node_id] = int(line.split()[1])
        return sizes

    def log_path(self, node_id: int) -> Path:
        """Node ``node_id``'s ``server.log`` (0: the controller); a restarted node appends."""
        if node_id not in self._nodes:
            raise ValueError(f"node_id must be one of {sorted(self._nodes)}, got {node_id!r}")
        return self._nodes[node_id].run_dir / "logs" / "server.log"

    def log_tail(self, node_id: int, lines: int = 30) -> str:
        """The last ``lines`` lines of node ``node_id``'s ``server.log`` and JVM stdout."""
        return log_tail(self._nodes[node_id].run_dir, lines)


async def _listed_brokers(client: ClusterClient) -> list[int]:
    return list((await client.metadata(topics=())).brokers)


def _terminate(node: _Node, timeout_s: float) -> None:
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


@contextlib.contextmanager
def running_cluster(brokers: int = 3, **kwargs: object) -> Iterator[LocalCluster]:
    """Context manager: a started :class:`LocalCluster` (keyword arguments as its fields)."""
    with LocalCluster(brokers, **kwargs) as cluster:  # type: ignore[arg-type]
        yield cluster
