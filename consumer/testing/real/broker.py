"""A real Apache Kafka 4.x broker on loopback, built from Maven Central jars.

This is the embedded default of the examples and the backend of every integration test: a
single KRaft node (broker + controller) started with ``java kafka.Kafka``, no Docker, no
tarball. The jars are resolved once per machine and Kafka version with Maven
(``consumer/testing/real/kafka-pom.xml`` and ``mvn dependency:copy-dependencies``) into a per-user
cache; storage is always formatted with ``kafka.tools.StorageTool`` (a hand-written
``meta.properties`` leaves ``group.version=0`` and breaks the consumer protocol).

Typical use::

    with LocalBroker() as broker:
        print(broker.bootstrap_servers)   # "127.0.0.1:PORT"

The broker is ready only when a real ApiVersions call lists ConsumerGroupHeartbeat (API key 68).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

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
from consumer.testing.real.kafka_jars import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    resolve_kafka_jars,
)

__all__ = [
    "LocalBroker",
    "fast_group_settings",
    "fast_share_group_settings",
    "free_port",
    "running_broker",
]

_JVM_FLAGS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


def fast_group_settings() -> dict[str, str]:
    """Broker settings that make consumer-group tests fast (500 ms heartbeats, 6 s sessions)."""
    return {
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.heartbeat.interval.ms": "100",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.min.session.timeout.ms": "1000",
        # Kafka 4.3 batches target-assignment updates (default 1000 ms); tests want them at once.
        "group.consumer.assignment.interval.ms": "0",
        "group.consumer.min.assignment.interval.ms": "0",
        "group.min.session.timeout.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        **fast_share_group_settings(),
    }


def fast_share_group_settings() -> dict[str, str]:
    """Broker settings that make share-group (KIP-932) tests fast; part of
    :func:`fast_group_settings`, so every :class:`LocalBroker` has them.

    Share groups need no switch on Kafka 4.2+ (``share.version=1`` is the default feature level
    of a freshly formatted cluster). These settings give 500 ms heartbeats, 6 s sessions,
    immediate assignments, and lower the per-group bounds so a test can set a group's
    ``share.record.lock.duration.ms`` down to 1 s and ``share.delivery.count.limit`` down to 2
    (by IncrementalAlterConfigs on the GROUP resource). The broker-wide lock duration (30 s)
    and delivery limit (5) stay at Kafka's defaults.
    """
    return {
        "group.share.heartbeat.interval.ms": "500",
        "group.share.min.heartbeat.interval.ms": "100",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "1000",
        "group.share.assignment.interval.ms": "0",
        "group.share.min.assignment.interval.ms": "0",
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.min.delivery.count.limit": "2",
    }


def _new_cluster_id() -> str:
    """A random cluster id as Kafka draws them: 16 bytes, URL-safe base64, no leading '-'.

    (A leading '-' would be read as an option by the storage tool's argument parser.)
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class LocalBroker(Service):
    """One Kafka node (broker + KRaft controller) on 127.0.0.1.

    ``overrides`` are added to (and win over) the generated ``server.properties``.
    ``format_features`` are passed to the storage formatter as ``--feature NAME=LEVEL``
    (``{"group.version": "0"}`` gives a broker without the consumer group protocol, as before 4.0).
    ``format_args`` are extra arguments appended to the storage formatter's command line, e.g.
    ``("--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")`` (KRaft creates SCRAM
    users at format time; see :mod:`consumer.testing.real.security`).
    ``allow_legacy_version`` admits a 3.x ``kafka_version`` (compatibility tests only).
    ``bind_to_parent`` makes the kernel kill the broker when this process dies, which is what
    a test session wants; ``kgm broker start --detach`` turns it off.
    """

    kafka_version: str = field(
        default_factory=lambda: os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    )
    overrides: Mapping[str, str] = field(default_factory=dict)
    run_dir: Path | None = None
    ready_timeout_s: float = 90.0
    stop_timeout_s: float = 15.0
    bind_to_parent: bool = True
    require_consumer_protocol: bool = True
    format_features: Mapping[str, str] = field(default_factory=dict)
    allow_legacy_version: bool = False
    start_attempts: int = 3
    port: int = 0
    format_args: Sequence[str] = ()
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _owns_run_dir: bool = field(default=False, init=False, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the PLAINTEXT listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The broker's ``server.log`` (log4j2)."""
        assert self.run_dir is not None
        return self.run_dir / "logs" / "server.log"

    def server_properties(self, controller_port: int) -> dict[str, str]:
        """The full ``server.properties`` this broker starts with."""
        assert self.run_dir is not None
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.run_dir / "data"),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "true",
            "log.cleaner.dedupe.buffer.size": "2097152",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "group.coordinator.threads": "1",
            **fast_group_settings(),
        }
        props.update(self.overrides)
        return props

    def start(self) -> Self:
        """Resolve jars, format storage, start the JVM and wait until key 68 is advertised.

        A start that fails is tried again (``start_attempts`` in all) on fresh ports and a
        fresh data folder, as spring-kafka does for its embedded KRaft broker: a port found
        free can be taken before the JVM binds it, and a loaded machine can be slow to form
        the quorum. A broker on a fixed port or folder is tried once.
        """
        fixed = bool(self.port) or self.run_dir is not None
        attempts = 1 if fixed else max(1, self.start_attempts)
        for attempt in range(1, attempts + 1):
            try:
                return self._start_once()
            except BrokerStartError:
                if attempt == attempts:
                    raise
                self.stop()  # removes the failed attempt's data folder
                self.port = 0
                self.run_dir = None
                self._owns_run_dir = False
        raise AssertionError("unreachable")

    def _start_once(self) -> Self:
        lib_dir = resolve_kafka_jars(self.kafka_version, allow_legacy=self.allow_legacy_version)
        if self.run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix="kgm-broker-"))
            self._owns_run_dir = True
        if not self.port:
            self.port = free_port()
        props_path = write_run_files(self.run_dir, self.server_properties(free_port()))
        log_opts = log_options(self.run_dir)
        format_storage(
            lib_dir,
            props_path,
            _new_cluster_id(),
            log_opts,
            (
                *(
                    arg
                    for name, level in self.format_features.items()
                    for arg in ("--feature", f"{name}={level}")
                ),
                *self.format_args,
            ),
        )
        self._launch(lib_dir, log_opts, append_stdout=False)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, lib_dir: Path, log_opts: Sequence[str], *, append_stdout: bool) -> None:
        """Start the broker JVM on this run folder's ``server.properties``."""
        assert self.run_dir is not None
        self.process = launch_jvm(
            lib_dir,
            self.run_dir,
            log_opts,
            _JVM_FLAGS,
            append_stdout=append_stdout,
            bind_to_parent=self.bind_to_parent,
        )

    def restart(self, *, hard: bool = False) -> None:
        """Stop the JVM (SIGKILL when ``hard``, else SIGTERM) and start it again on the same
        data, ports and settings; returns once the broker is ready again.

        Unlike :meth:`start`, storage is not formatted again (the data, the cluster id and the
        committed offsets survive), which is what crash and restart tests need.
        """
        if self.process is None or self.run_dir is None:
            raise BrokerStartError("restart() needs a broker that was started")
        if hard:
            self.kill()
        elif self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        lib_dir = resolve_kafka_jars(self.kafka_version, allow_legacy=self.allow_legacy_version)
        self._launch(lib_dir, log_options(self.run_dir), append_stdout=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        assert self.process is not None
        wait_serving(
            self.process,
            self.port,
            self.ready_timeout_s,
            self.log_tail,
            require_consumer_protocol=self.require_consumer_protocol,
        )

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of ``server.log`` and the JVM's stdout."""
        assert self.run_dir is not None
        return log_tail(self.run_dir, lines)

    def stop(self) -> None:
        """SIGTERM the broker, SIGKILL it after ``stop_timeout_s``, and remove its data."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if self._owns_run_dir and self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the broker at once (for crash tests); its data folder is kept for a restart."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@contextlib.contextmanager
def running_broker(**kwargs: object) -> Iterator[LocalBroker]:
    """Context manager: a started :class:`LocalBroker` (keyword arguments as its fields)."""
    broker = LocalBroker(**kwargs)  # type: ignore[arg-type]
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


if __name__ == "__main__":  # pragma: no cover
    with LocalBroker() as b:
        print(f"bootstrap.servers={b.bootstrap_servers}", flush=True)
        sys.stdin.read()
