"""State of the broker ``kgm broker start --detach`` left running, for ``status`` and ``stop``.

The state is kept per project, so two checkouts (or two projects) each have their own detached
broker and ``kgm broker stop`` in one never stops the other's. Where it lives, first match wins:

1. an explicit ``state_dir`` (``kgm broker ... --state-dir DIR``);
2. ``$KGM_STATE_DIR``;
3. ``<cache>/brokers/<key>/``, where ``<key>`` is derived from the project root: the nearest
   folder, from the current working directory upwards, that holds ``pyproject.toml``,
   ``setup.py``, ``setup.cfg`` or ``.git`` (the working directory itself when none does).
"""

from __future__ import annotations

import contextlib
import hashlib
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
    "PROJECT_MARKERS",
    "DetachedBroker",
    "broker_state_path",
    "project_root",
    "read_broker_state",
    "stop_detached_broker",
    "wait_for_pid_exit",
    "write_broker_state",
]


#: Files or folders that mark a project root (see :func:`project_root`).
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")

_STATE_FILE = "broker.json"


def project_root(start: Path | None = None) -> Path:
    """The project a ``kgm broker`` command belongs to: the nearest folder from ``start``
    (default: the working directory) upwards that holds one of :data:`PROJECT_MARKERS`, or
    ``start`` itself when none does."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder
    return here


def broker_state_path(state_dir: str | Path | None = None) -> Path:
    """Where the detached broker's pid, address and run folder are recorded.

    ``state_dir`` (then ``$KGM_STATE_DIR``) names the folder outright; otherwise each project
    root gets its own folder under the per-user cache (see the module docstring).
    """
    if state_dir is not None:
        return Path(state_dir) / _STATE_FILE
    from_env = os.environ.get("KGM_STATE_DIR")
    if from_env:
        return Path(from_env) / _STATE_FILE
    root = project_root()
    key = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return cache_dir() / "brokers" / f"{root.name or 'root'}-{key}" / _STATE_FILE


@dataclass(frozen=True)
class DetachedBroker:
    """What ``kgm broker start --detach`` recorded about the broker it left running."""

    pid: int
    bootstrap_servers: str
    run_dir: str
    kafka_version: str
    #: The folder whose ``kgm broker start`` made it (empty in state written before 0.1).
    project_root: str = ""


def write_broker_state(broker: LocalBroker, state_dir: str | Path | None = None) -> DetachedBroker:
    """Record a started broker so a later ``kgm`` process (same project or ``state_dir``) can
    find and stop it."""
    assert broker.process is not None
    assert broker.run_dir is not None
    state = DetachedBroker(
        pid=broker.process.pid,
        bootstrap_servers=broker.bootstrap_servers,
        run_dir=str(broker.run_dir),
        kafka_version=broker.kafka_version,
        project_root=str(project_root()),
    )
    path = broker_state_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state.__dict__))
    return state


def read_broker_state(state_dir: str | Path | None = None) -> DetachedBroker | None:
    """The recorded detached broker if its process is still alive, else ``None``."""
    path = broker_state_path(state_dir)
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


def stop_detached_broker(
    timeout_s: float = 15.0, state_dir: str | Path | None = None
) -> DetachedBroker | None:
    """Stop the detached broker recorded for this project (or in ``state_dir``); returns what
    was stopped, or ``None`` if none ran. Other projects' brokers are left alone."""
    state = read_broker_state(state_dir)
    path = broker_state_path(state_dir)
    if state is None:
        _forget(path)
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)
    if not wait_for_pid_exit(state.pid, timeout_s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
        wait_for_pid_exit(state.pid, 10.0)
    shutil.rmtree(state.run_dir, ignore_errors=True)
    _forget(path)
    return state


def _forget(path: Path) -> None:
    """Remove a state file, and its per-project folder if that is now empty."""
    path.unlink(missing_ok=True)
    if path.parent.parent.name == "brokers":
        with contextlib.suppress(OSError):
            path.parent.rmdir()
