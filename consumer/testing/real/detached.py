"""State of the broker ``kgm broker start --detach`` left running, for ``status`` and ``stop``."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from consumer.testing.real.kafka_jars import cache_dir

if TYPE_CHECKING:
    from consumer.testing.real.broker import LocalBroker

__all__ = [
    "DetachedBroker",
    "broker_state_path",
    "read_broker_state",
    "stop_detached_broker",
    "wait_for_pid_exit",
    "write_broker_state",
]


def broker_state_path() -> Path:
    """Where the detached broker's pid, address and run folder are recorded.

    ``KGM_STATE_DIR`` moves it (tests use that to run a detached broker of their own).
    """
    state_dir = os.environ.get("KGM_STATE_DIR")
    return (Path(state_dir) if state_dir else cache_dir()) / "broker.json"


@dataclass(frozen=True)
class DetachedBroker:
    """What ``kgm broker start --detach`` recorded about the broker it left running."""

    pid: int
    bootstrap_servers: str
    run_dir: str
    kafka_version: str


def write_broker_state(broker: LocalBroker) -> DetachedBroker:
    """Record a started broker so a later ``kgm`` process can find and stop it."""
    assert broker.process is not None
    assert broker.run_dir is not None
    state = DetachedBroker(
        pid=broker.process.pid,
        bootstrap_servers=broker.bootstrap_servers,
        run_dir=str(broker.run_dir),
        kafka_version=broker.kafka_version,
    )
    path = broker_state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state.__dict__))
    return state


def read_broker_state() -> DetachedBroker | None:
    """The recorded detached broker if its process is still alive, else ``None``."""
    path = broker_state_path()
    try:
        state = DetachedBroker(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if not _pid_alive(state.pid):
        return None
    return state


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
    return True


def wait_for_pid_exit(pid: int, timeout_s: float) -> bool:
    """Block until process ``pid`` (not necessarily our child) exits; ``False`` on timeout.

    Uses a Linux pidfd, which becomes readable when the process ends: no polling.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([pidfd], [], [], timeout_s)
        return bool(readable)
    finally:
        os.close(pidfd)


def stop_detached_broker(timeout_s: float = 15.0) -> DetachedBroker | None:
    """Stop the recorded detached broker; returns what was stopped, or ``None`` if none ran."""
    state = read_broker_state()
    path = broker_state_path()
    if state is None:
        path.unlink(missing_ok=True)
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)
    if not wait_for_pid_exit(state.pid, timeout_s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
        wait_for_pid_exit(state.pid, 10.0)
    shutil.rmtree(state.run_dir, ignore_errors=True)
    path.unlink(missing_ok=True)
    return state
