"""The local broker launcher and the ``kgm broker`` commands, run for real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from consumer.testing.real._probe import probe_api_keys
from consumer.testing.real.broker import LocalBroker
from consumer.testing.real.detached import wait_for_pid_exit
from consumer.testing.real.kafka_jars import resolve_kafka_jars

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_kgm_broker_commands_from_a_fresh_venv(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", str(REPO_ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr
    kgm = str(env_dir / "bin" / "kgm")
    env = {**os.environ, "KGM_STATE_DIR": str(tmp_path / "state")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kgm, *args], capture_output=True, text=True, env=env, timeout=180)

    assert run("broker", "status").returncode == 1
    started = run("broker", "start", "--detach")
    assert started.returncode == 0, started.stderr
    line = started.stdout.strip().splitlines()[-1]
    assert line.startswith("bootstrap.servers=127.0.0.1:")
    port = int(line.rsplit(":", 1)[1])
    try:
        status = run("broker", "status")
        assert status.returncode == 0
        assert status.stdout.strip() == line
        assert 68 in probe_api_keys("127.0.0.1", port)
        state = (tmp_path / "state" / "broker.json").read_text()
    finally:
        stopped = run("broker", "stop")
    assert stopped.returncode == 0, stopped.stderr
    pid = int(state.split('"pid": ')[1].split(",")[0])
    assert wait_for_pid_exit(pid, timeout_s=20)
    assert run("broker", "status").returncode == 1
    with pytest.raises(OSError, match="refused|reset|closed"):
        probe_api_keys("127.0.0.1", port, timeout_s=1.0)


def test_broker_is_killed_when_the_process_that_started_it_crashes(tmp_path: Path) -> None:
    resolve_kafka_jars()  # outside the child, so its start-up is only the JVM's
    script = textwrap.dedent(
        """
        import sys
        from consumer.testing.real.broker import LocalBroker
        broker = LocalBroker().start()
        print(broker.process.pid, broker.port, flush=True)
        sys.stdin.read()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        pid_text, port_text = parent.stdout.readline().split()
        broker_pid = int(pid_text)
        assert 68 in probe_api_keys("127.0.0.1", int(port_text))
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_for_pid_exit(broker_pid, timeout_s=20), "the broker outlived its crashed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        for stream in (parent.stdin, parent.stdout):
            if stream is not None:
                stream.close()


def test_a_failed_start_reports_the_broker_log(tmp_path: Path) -> None:
    broker = LocalBroker(overrides={"num.io.threads": "not-a-number"}, ready_timeout_s=60)
    with pytest.raises(Exception, match="num.io.threads"):
        broker.start()
    assert broker.process is None


def test_restart_keeps_the_data_and_the_address() -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    with LocalBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("survives-restart", 2, 1)])["survives-restart"].result(30)
        first_pid = broker.process.pid if broker.process else None
        address = broker.bootstrap_servers
        broker.restart(hard=True)
        assert broker.process is not None
        assert broker.process.pid != first_pid
        assert broker.bootstrap_servers == address
        assert 68 in probe_api_keys("127.0.0.1", broker.port)
        topics = AdminClient({"bootstrap.servers": address}).list_topics(timeout=30).topics
        assert "survives-restart" in topics
        assert len(topics["survives-restart"].partitions) == 2


def test_restart_needs_a_started_broker() -> None:
    from consumer.testing.real.kafka_jars import BrokerStartError

    with pytest.raises(BrokerStartError, match="needs a broker that was started"):
        LocalBroker().restart()
