"""Two projects, two detached brokers: ``kgm broker stop`` in one leaves the other running.

Run for real: ``kgm broker start --detach`` from two project folders (each with a
``pyproject.toml``), with no ``KGM_STATE_DIR``, so each command finds its state by project root.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from consumer.testing.real._probe import probe_api_keys
from consumer.testing.real.detached import wait_for_pid_exit
from consumer.testing.real.kafka_jars import resolve_kafka_jars

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


def _kgm(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KGM_STATE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "consumer.cli", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _status(project: Path) -> tuple[int, int] | None:
    """(port, pid) of the project's detached broker, or None when it has none."""
    status = _kgm(project, "broker", "status")
    if status.returncode != 0:
        return None
    port = int(status.stdout.strip().rsplit(":", 1)[1])
    pid = int(status.stderr.split("pid ", 1)[1].split()[0].rstrip(")"))
    return port, pid


def test_stop_in_one_project_leaves_the_other_projects_broker_running(tmp_path: Path) -> None:
    resolve_kafka_jars()  # once, outside the timed child commands
    one, two = tmp_path / "one", tmp_path / "two"
    for project in (one, two):
        (project / "pkg").mkdir(parents=True)
        (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    try:
        for project in (one, two):
            started = _kgm(project / "pkg", "broker", "start", "--detach")
            assert started.returncode == 0, started.stderr
        first, second = _status(one), _status(two / "pkg")
        assert first is not None
        assert second is not None
        assert first[0] != second[0]
        assert first[1] != second[1]

        stopped = _kgm(one, "broker", "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert f"127.0.0.1:{first[0]}" in stopped.stdout
        assert wait_for_pid_exit(first[1], timeout_s=30)
        assert _status(one) is None
        assert _status(two) == second
        assert 68 in probe_api_keys("127.0.0.1", second[0])
    finally:
        for project in (one, two):
            _kgm(project, "broker", "stop")
    assert _status(two) is None
