"""Where ``kgm broker start --detach`` keeps its state: one location per project root (or an
explicit ``--state-dir``), so stopping one project's broker never stops another's.

The "brokers" here are plain child processes standing in for the JVM: what is tested is which
process each state location leads to, not Kafka.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumer.cli import main as kgm
from consumer.testing.real import detached
from consumer.testing.real.detached import (
    DetachedBroker,
    broker_state_path,
    project_root,
    read_broker_state,
    stop_detached_broker,
)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every state location of these tests lives under ``tmp_path``."""
    monkeypatch.delenv("KGM_STATE_DIR", raising=False)
    monkeypatch.setattr(detached, "cache_dir", lambda: tmp_path / "cache")


@pytest.fixture
def stand_ins() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Child processes that live until killed (stand-ins for detached brokers)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def _project(tmp_path: Path, name: str, marker: str = "pyproject.toml") -> Path:
    root = tmp_path / name
    (root / "src" / "pkg").mkdir(parents=True)
    (root / marker).write_text("")
    return root


def _record(path: Path, process: subprocess.Popen[bytes], run_dir: Path, port: int) -> None:
    """Write a state file as ``write_broker_state`` does, for a stand-in process."""
    import json

    run_dir.mkdir(parents=True, exist_ok=True)
    state = DetachedBroker(process.pid, f"127.0.0.1:{port}", str(run_dir), "4.3.1", "x")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state.__dict__))


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])


def test_project_root_is_the_nearest_folder_with_a_marker(tmp_path: Path) -> None:
    root = _project(tmp_path, "shop")
    assert project_root(root / "src" / "pkg") == root.resolve()
    git_root = _project(tmp_path, "checkout", marker=".git")
    assert project_root(git_root / "src") == git_root.resolve()
    bare = tmp_path / "bare" / "deep"
    bare.mkdir(parents=True)
    assert project_root(bare) == bare.resolve()


def test_each_project_has_its_own_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = _project(tmp_path, "one"), _project(tmp_path, "one-copy")
    monkeypatch.chdir(one / "src" / "pkg")
    in_one_subfolder = broker_state_path()
    monkeypatch.chdir(one)
    in_one = broker_state_path()
    monkeypatch.chdir(two)
    in_two = broker_state_path()
    assert in_one == in_one_subfolder
    assert in_one != in_two
    assert in_one.is_relative_to(tmp_path / "cache" / "brokers")


def test_explicit_state_dir_wins_over_the_environment_and_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(_project(tmp_path, "app"))
    monkeypatch.setenv("KGM_STATE_DIR", str(tmp_path / "from-env"))
    assert broker_state_path() == tmp_path / "from-env" / "broker.json"
    assert broker_state_path(tmp_path / "explicit") == tmp_path / "explicit" / "broker.json"


def test_stopping_one_projects_broker_leaves_the_other_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stand_ins: list[subprocess.Popen[bytes]]
) -> None:
    one, two = _project(tmp_path, "one"), _project(tmp_path, "two")
    first, second = _sleeper(), _sleeper()
    stand_ins += [first, second]
    monkeypatch.chdir(one)
    _record(broker_state_path(), first, tmp_path / "run-1", 1111)
    monkeypatch.chdir(two)
    _record(broker_state_path(), second, tmp_path / "run-2", 2222)

    monkeypatch.chdir(one / "src")
    stopped = stop_detached_broker(timeout_s=10)
    assert stopped is not None
    assert stopped.pid == first.pid
    assert first.wait(timeout=10) is not None
    assert not (tmp_path / "run-1").exists()
    assert read_broker_state() is None
    assert second.poll() is None
    assert (tmp_path / "run-2").exists()

    monkeypatch.chdir(two)
    still = read_broker_state()
    assert still is not None
    assert still.pid == second.pid
    assert stop_detached_broker(timeout_s=10) is not None
    assert second.wait(timeout=10) is not None
    assert not (tmp_path / "cache" / "brokers").exists() or not any(
        (tmp_path / "cache" / "brokers").iterdir()
    )


def test_cli_state_dir_option_selects_the_broker(
    tmp_path: Path,
    stand_ins: list[subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(_project(tmp_path, "app"))
    a_dir, b_dir = tmp_path / "state-a", tmp_path / "state-b"
    a, b = _sleeper(), _sleeper()
    stand_ins += [a, b]
    _record(a_dir / "broker.json", a, tmp_path / "run-a", 3333)
    _record(b_dir / "broker.json", b, tmp_path / "run-b", 4444)

    assert kgm(["broker", "status", "--state-dir", str(b_dir)]) == 0
    assert capsys.readouterr().out.strip() == "bootstrap.servers=127.0.0.1:4444"
    assert kgm(["broker", "status"]) == 1  # the project's own location holds nothing
    capsys.readouterr()

    assert kgm(["broker", "stop", "--state-dir", str(a_dir)]) == 0
    assert "127.0.0.1:3333" in capsys.readouterr().out
    assert a.wait(timeout=10) is not None
    assert b.poll() is None
    assert kgm(["broker", "status", "--state-dir", str(b_dir)]) == 0


def test_state_written_before_project_roots_is_still_read(tmp_path: Path) -> None:
    import json

    process = _sleeper()
    try:
        path = tmp_path / "old" / "broker.json"
        path.parent.mkdir()
        old = {"pid": process.pid, "bootstrap_servers": "127.0.0.1:9", "run_dir": "/nonexistent"}
        path.write_text(json.dumps({**old, "kafka_version": "4.3.1"}))
        state = read_broker_state(tmp_path / "old")
        assert state is not None
        assert state.project_root == ""
    finally:
        process.kill()
        process.wait(timeout=10)
