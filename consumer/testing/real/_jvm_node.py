"""Pieces of one Kafka node's life shared by :class:`~consumer.testing.real.broker.LocalBroker`
and :class:`~consumer.testing.real.cluster.LocalCluster`: its run folder's files, the storage
format, the JVM launch, the readiness probe and the log tail."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from consumer.testing.real._probe import probe_api_keys
from consumer.testing.real.kafka_jars import BrokerStartError, java_executable

CONSUMER_GROUP_HEARTBEAT_KEY = 68

LOG4J2_PROPERTIES = """\
property.logdir = ${sys:kafka.logs.dir:-.}
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${logdir}/server.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = INFO
logger.groupcoordinator.name = org.apache.kafka.coordinator.group
logger.groupcoordinator.level = INFO
logger.coordinatorruntime.name = org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime
logger.coordinatorruntime.level = INFO
"""

#: Heap and JIT flags of the short-lived storage-format JVM.
TOOL_JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _kill_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGKILL the broker if the process that started it dies (crashed pytest)."""
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    os.setsid()


def _detach() -> None:  # pragma: no cover - runs in the child between fork and exec
    os.setsid()


def log_options(run_dir: Path) -> tuple[str, ...]:
    """JVM options that send a node's log4j2 output to ``run_dir/logs/server.log``."""
    return (
        f"-Dlog4j2.configurationFile={run_dir / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={run_dir / 'logs'}",
    )


def write_run_files(run_dir: Path, properties: Mapping[str, str]) -> Path:
    """Write ``server.properties`` and ``log4j2.properties`` into ``run_dir`` (``logs/``
    created); returns the path of ``server.properties``."""
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    props_path = run_dir / "server.properties"
    props_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    (run_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
    return props_path


def format_storage(
    lib_dir: Path,
    props_path: Path,
    cluster_id: str,
    log_opts: Sequence[str],
    extra_args: Sequence[str] = (),
) -> None:
    """Format a node's storage with ``kafka.tools.StorageTool`` (raises BrokerStartError)."""
    fmt = subprocess.run(
        [
            java_executable(),
            *TOOL_JVM_FLAGS,
            *log_opts,
            "-cp",
            str(lib_dir / "*"),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(props_path),
            *extra_args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if fmt.returncode != 0:
        raise BrokerStartError(f"kafka.tools.StorageTool format failed:\n{fmt.stdout}{fmt.stderr}")


def launch_jvm(
    lib_dir: Path,
    run_dir: Path,
    log_opts: Sequence[str],
    jvm_flags: Sequence[str],
    *,
    append_stdout: bool,
    bind_to_parent: bool,
) -> subprocess.Popen[bytes]:
    """Start ``kafka.Kafka`` on ``run_dir/server.properties`` (stdout to ``logs/stdout.log``)."""
    with open(run_dir / "logs" / "stdout.log", "ab" if append_stdout else "wb") as out:
        return subprocess.Popen(
            [
                java_executable(),
                *jvm_flags,
                *log_opts,
                "-cp",
                str(lib_dir / "*"),
                "kafka.Kafka",
                str(run_dir / "server.properties"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_kill_with_parent if bind_to_parent else _detach,  # noqa: PLW1509
        )


def wait_serving(
    process: subprocess.Popen[bytes],
    port: int,
    ready_timeout_s: float,
    tail: Callable[[], str],
    *,
    require_consumer_protocol: bool = True,
) -> None:
    """Return once ApiVersions on ``127.0.0.1:port`` lists ConsumerGroupHeartbeat (key 68), or
    any answer if not ``require_consumer_protocol``; raise BrokerStartError (with ``tail()``,
    the node's last log lines) if the process exits or the time runs out."""
    deadline = time.monotonic() + ready_timeout_s
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerStartError(
                f"the broker exited with code {process.returncode} during start-up; "
                f"last lines of its logs:\n{tail()}"
            )
        try:
            keys = probe_api_keys("127.0.0.1", port, timeout_s=2.0)
        except OSError as exc:
            last_error = str(exc)
            # Nothing announces that the JVM opened its port: poll it again shortly.
            time.sleep(0.2)
            continue
        if CONSUMER_GROUP_HEARTBEAT_KEY in keys or not require_consumer_protocol:
            return
        last_error = "ApiVersions does not list ConsumerGroupHeartbeat (key 68) yet"
        time.sleep(0.2)
    raise BrokerStartError(
        f"the broker did not become ready within {ready_timeout_s:.0f} s ({last_error}); "
        f"last lines of its logs:\n{tail()}"
    )


def log_tail(run_dir: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a node's ``server.log`` and JVM stdout."""
    chunks = []
    for path in (run_dir / "logs" / "server.log", run_dir / "logs" / "stdout.log"):
        if path.exists():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            chunks.append(f"--- {path.name}\n" + "\n".join(text))
    return "\n".join(chunks) or "(no logs written)"
