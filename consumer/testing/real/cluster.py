"""A local Apache Kafka 4.x cluster: KRaft controllers and several brokers, each its own JVM.

:class:`LocalCluster` is :class:`~consumer.testing.real.broker.LocalBroker`'s multi-node sibling,
for tests where a broker dies while members work: a partition leader or a group coordinator is
killed (SIGKILL), stopped (SIGTERM, a controlled shutdown), paused (SIGSTOP) and brought back,
and the data stays available because every topic, ``__consumer_offsets`` and
``__share_group_state`` included, is replicated three times with ``min.insync.replicas=2``.

The controllers are nodes of their own (node id 0, and 10, 11, ... for a quorum of
``controllers=3``) rather than roles of brokers: killing any broker then never takes the quorum
down with it, so a test can kill whichever broker leads the partition or coordinates the group it
is watching. A controller-only JVM is small (no log manager, no group coordinators) and starts in
parallel with the brokers, so it costs little start time on a two-core machine. Brokers heartbeat
every 500 ms and are fenced after 3 s of silence, so a killed leader is replaced within a few
seconds. With a quorum, :meth:`LocalCluster.active_controller` names the controller that leads
the metadata log (DescribeQuorum), so a test can kill it and watch another take over.

Typical use::

    with LocalCluster(brokers=3) as cluster:
        leader = cluster.leader_of("orders", 0)
        cluster.kill(leader)
        ...
        cluster.restart(leader)

    with LocalCluster(brokers=3, controllers=3) as cluster:
        cluster.kill(cluster.active_controller())   # the quorum elects another leader
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self, TypeVar

from kio.schema.describe_quorum.v2.request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kio.schema.describe_quorum.v2.response import DescribeQuorumResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32

from consumer._runtime.cluster import ClusterClient
from consumer.testing.real._cluster_nodes import (
    BROKER_JVM_FLAGS,
    CONTROLLER_JVM_FLAGS,
    CONTROLLER_NODE_ID,
    ClusterNode,
    controller_ids,
    node_properties,
    rss_kib,
    terminate,
    terminate_together,
)
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
from consumer.testing.real.broker import _new_cluster_id
from consumer.testing.real.kafka_jars import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    resolve_kafka_jars,
)
from consumer.testing.real.security import Listener

__all__ = ["LocalCluster", "running_cluster"]

_T = TypeVar("_T")

#: The KRaft metadata log, whose leader is the active controller.
_METADATA_LOG = TopicData(
    topic_name=TopicName("__cluster_metadata"), partitions=(PartitionData(partition_index=i32(0)),)
)


@dataclass
class LocalCluster(Service):
    """``brokers`` Kafka brokers and ``controllers`` KRaft controllers on 127.0.0.1, each its own
    JVM.

    Topics are created with replication factor ``min(3, brokers)`` and
    ``min.insync.replicas=min(2, brokers)`` unless a test says otherwise, and so are the
    internal ``__consumer_offsets`` (3 partitions) and ``__share_group_state`` topics. Every
    broker has :func:`~consumer.testing.real.broker.fast_group_settings`. ``overrides`` are
    added to (and win over) every broker's ``server.properties``; ``broker_overrides`` maps a
    broker's node id to settings for that broker only (they win over ``overrides``), and
    ``broker_listeners`` to listeners it binds besides PLAINTEXT (see
    :class:`~consumer.testing.real.proxied_cluster.ProxiedCluster`).

    ``controllers`` is 1 (node 0) or a quorum of 3 or 5 (nodes 0, 10, 11, ...): a quorum
    survives the loss of its active controller (:meth:`active_controller`).

    Faults take a node id, a broker's (1 .. ``brokers``) or a controller's
    (:attr:`controller_ids`): :meth:`kill` (SIGKILL), :meth:`stop` (SIGTERM: a controlled
    shutdown), :meth:`pause` / :meth:`resume` (SIGSTOP / SIGCONT) and :meth:`restart` (on the
    same data and port).
    """

    brokers: int = 3
    kafka_version: str = field(
        default_factory=lambda: os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    )
    overrides: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 120.0
    stop_timeout_s: float = 15.0
    bind_to_parent: bool = True
    controllers: int = 1
    broker_overrides: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    broker_listeners: Mapping[int, Sequence[Listener]] = field(default_factory=dict)
    _root: Path | None = field(default=None, init=False, repr=False)
    _nodes: dict[int, ClusterNode] = field(default_factory=dict, init=False, repr=False)
    # Every JVM is launched from this one thread: with ``bind_to_parent`` Linux kills a JVM when
    # the *thread* that forked it ends (PR_SET_PDEATHSIG), so a broker restarted from a test's
    # worker thread would otherwise die with that thread.
    _launcher: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= 9:
            raise ValueError(f"brokers must be between 1 and 9, got {self.brokers!r}")
        if self.controllers not in (1, 3, 5):
            raise ValueError(f"controllers must be 1, 3 or 5, got {self.controllers!r}")
        for name, per_broker in (
            ("broker_overrides", self.broker_overrides),
            ("broker_listeners", self.broker_listeners),
        ):
            unknown = sorted(set(per_broker) - set(self.broker_ids))
            if unknown:
                raise ValueError(f"{name} keys must be broker ids {self.broker_ids}, got {unknown}")

    @property
    def broker_ids(self) -> list[int]:
        """Node ids of the brokers: 1 .. ``brokers``."""
        return list(range(1, self.brokers + 1))

    @property
    def controller_ids(self) -> list[int]:
        """Node ids of the KRaft controllers: 0, then 10, 11, ... for a quorum."""
        return controller_ids(self.controllers)

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of every broker, comma-separated."""
        return ",".join(self.address_of(node_id) for node_id in self.broker_ids)

    def address_of(self, node_id: int) -> str:
        """``127.0.0.1:PORT`` of broker ``node_id``."""
        return f"127.0.0.1:{self._broker(node_id).port}"

    def is_running(self, node_id: int) -> bool:
        """Whether node ``node_id``'s JVM (a broker or a controller) is alive (a paused one is)."""
        return self._node(node_id).running

    def running_bootstrap_servers(self) -> str:
        """``bootstrap_servers`` of the brokers whose JVM is alive."""
        return ",".join(self.address_of(n) for n in self.broker_ids if self.is_running(n))

    def server_properties(self, node_id: int) -> dict[str, str]:
        """The full ``server.properties`` node ``node_id`` starts with."""
        controllers = [self._nodes[c] for c in self.controller_ids]
        overrides = {**self.overrides, **self.broker_overrides.get(node_id, {})}
        listeners = self.broker_listeners.get(node_id, ())
        return node_properties(self._node(node_id), controllers, self.brokers, overrides, listeners)

    def start(self) -> Self:
        """Format every node's storage with one cluster id, start all JVMs at once and return
        when every broker answers ApiVersions with key 68 and is registered (unfenced)."""
        if self._nodes:
            raise BrokerStartError("this LocalCluster was already started")
        lib_dir = resolve_kafka_jars(self.kafka_version)
        self._root = Path(tempfile.mkdtemp(prefix="kgm-cluster-"))
        node_ids = [*self.controller_ids, *self.broker_ids]
        for node_id in node_ids:
            flags = CONTROLLER_JVM_FLAGS if node_id in self.controller_ids else BROKER_JVM_FLAGS
            self._nodes[node_id] = ClusterNode(node_id, self._root / f"node-{node_id}", 0, flags)
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
        node = self._node(node_id)
        assert node.process is not None
        wait_serving(
            node.process,
            node.port,
            self.ready_timeout_s,
            lambda: self.log_tail(node_id),
            require_consumer_protocol=node_id in self.broker_ids,
        )

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

    def _broker(self, node_id: int) -> ClusterNode:
        if node_id not in self.broker_ids:
            raise ValueError(f"node_id must be a broker id {self.broker_ids}, got {node_id!r}")
        return self._node(node_id)

    def _node(self, node_id: int) -> ClusterNode:
        known = [*self.controller_ids, *self.broker_ids]
        if node_id not in known:
            raise ValueError(f"node_id must be one of {known}, got {node_id!r}")
        if node_id not in self._nodes:
            raise BrokerStartError("the cluster was not started")
        return self._nodes[node_id]

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id`` (a crash: no controlled shutdown); its data is kept."""
        node = self._node(node_id)
        if node.process is not None and node.process.poll() is None:
            node.process.kill()
            node.process.wait(timeout=10)

    def stop(self, node_id: int | None = None) -> None:
        """SIGTERM node ``node_id`` (a broker's controlled shutdown moves its leaderships first),
        SIGKILL after ``stop_timeout_s``; its data is kept for :meth:`restart`.

        Without ``node_id``: stop every node and remove the cluster's data (safe to call
        more than once).
        """
        if node_id is not None:
            terminate(self._node(node_id), self.stop_timeout_s)
            return
        # Brokers first, so their controlled shutdowns still find the controllers.
        controllers = set(self.controller_ids)
        nodes = list(self._nodes.values())
        terminate_together([n for n in nodes if n.node_id not in controllers], self.stop_timeout_s)
        terminate_together([n for n in nodes if n.node_id in controllers], self.stop_timeout_s)
        self._nodes.clear()
        if self._launcher is not None:
            self._launcher.shutdown()
            self._launcher = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def pause(self, node_id: int) -> None:
        """SIGSTOP node ``node_id``: it keeps its sockets but answers nothing."""
        self._signal(node_id, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        """SIGCONT node ``node_id`` after :meth:`pause`."""
        self._signal(node_id, signal.SIGCONT)

    def _signal(self, node_id: int, signum: signal.Signals) -> None:
        node = self._node(node_id)
        if not node.running:
            raise BrokerStartError(f"node {node_id} is not running")
        assert node.process is not None
        os.kill(node.process.pid, signum)

    def restart(self, node_id: int) -> None:
        """Start node ``node_id`` again on its data and port (stopping it first if it runs);
        returns once it serves (a broker: and the controller lists it again)."""
        node = self._node(node_id)
        terminate(node, self.stop_timeout_s)
        self._launch(resolve_kafka_jars(self.kafka_version), node_id, append_stdout=True)
        self._wait_serving(node_id)
        if node_id in self.broker_ids:
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

    def active_controller(self) -> int:
        """Node id of the controller leading the metadata log now, from a DescribeQuorum request
        (a broker forwards it to the quorum); -1 while an election is under way."""

        async def ask(client: ClusterClient) -> int:
            listed = await _listed_brokers(client)
            alive = [n for n in listed if self._nodes[n].running]  # listed until fenced
            connection = await client.connection_to(alive[0])
            response = await connection.request(DescribeQuorumRequest(topics=(_METADATA_LOG,)))
            assert isinstance(response, DescribeQuorumResponse)
            partition = response.topics[0].partitions[0]
            if partition.error_code != 0:
                return -1
            return int(partition.leader_id)

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
        """Resident memory of each running node's JVM in KiB, by node id."""
        sizes = {node_id: rss_kib(node) for node_id, node in self._nodes.items()}
        return {node_id: kib for node_id, kib in sizes.items() if kib is not None}

    def log_path(self, node_id: int) -> Path:
        """Node ``node_id``'s ``server.log`` (a broker or a controller); a restarted node
        appends."""
        if node_id not in self._nodes:
            raise ValueError(f"node_id must be one of {sorted(self._nodes)}, got {node_id!r}")
        return self._nodes[node_id].run_dir / "logs" / "server.log"

    def log_tail(self, node_id: int, lines: int = 30) -> str:
        """The last ``lines`` lines of node ``node_id``'s ``server.log`` and JVM stdout."""
        return log_tail(self._nodes[node_id].run_dir, lines)


async def _listed_brokers(client: ClusterClient) -> list[int]:
    return list((await client.metadata(topics=())).brokers)


@contextlib.contextmanager
def running_cluster(brokers: int = 3, **kwargs: object) -> Iterator[LocalCluster]:
    """Context manager: a started :class:`LocalCluster` (keyword arguments as its fields)."""
    with LocalCluster(brokers, **kwargs) as cluster:  # type: ignore[arg-type]
        yield cluster
