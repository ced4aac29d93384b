"""``kgm broker start --brokers 3``, run for real: it prints the cluster's bootstrap servers, its
start time and memory, serves a three-broker cluster until Ctrl-C, and takes it down on exit."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from consumer import cli
from consumer._runtime.cluster import ClusterClient
from consumer.testing.real._probe import probe_api_keys
from consumer.testing.real.kafka_jars import resolve_kafka_jars

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO_ROOT = Path(__file__).resolve().parents[2]


def kgm(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "consumer.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


def wait_or_dump(process: subprocess.Popen[str], timeout_s: float) -> int:
    """``process``'s exit code; if it has not exited within ``timeout_s``, fail with the stack of
    every thread of it (faulthandler dumps them on SIGABRT) and the JVMs still running."""
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        signals = "".join(
            line + "\n"
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
            if line.startswith(("SigBlk", "SigIgn", "SigCgt"))
        )
        jvms = subprocess.run(
            ["ps", "-o", "pid,stat,etime,args", "--ppid", str(process.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        process.send_signal(signal.SIGABRT)
        _, stderr = process.communicate(timeout=30)
        pytest.fail(
            f"no exit {timeout_s:.0f} s after SIGINT; its signal masks:\n{signals}"
            f"(this process: SIGINT handler {signal.getsignal(signal.SIGINT)!r}, blocked "
            f"{signal.pthread_sigmask(signal.SIG_BLOCK, [])!r}); children:\n{jvms}\n"
            f"stderr:\n{stderr}"
        )


async def listed_brokers(bootstrap: str) -> list[int]:
    client = ClusterClient(bootstrap, client_id="kgm-cli-test")
    try:
        return sorted((await client.metadata(topics=())).brokers)
    finally:
        await client.close()


def test_kgm_broker_start_brokers_3_serves_a_cluster_until_interrupted() -> None:
    resolve_kafka_jars()  # outside the command, so its start time is the cluster's own
    process = kgm("broker", "start", "--brokers", "3")
    with process:
        try:
            assert process.stdout is not None
            assert process.stderr is not None
            # "" if the command died before the cluster ran.
            line = process.stdout.readline().strip()
            assert line.startswith("bootstrap.servers="), (
                f"no address printed: {line!r}; exit {process.poll()}; stderr:\n"
                f"{process.stderr.read() if process.poll() is not None else ''}"
            )
            addresses = line.removeprefix("bootstrap.servers=").split(",")
            assert len(addresses) == 3, addresses
            facts = process.stderr.readline().strip()
            match = re.fullmatch(
                r"3 brokers and a KRaft controller \(node 0\) started in ([0-9.]+) s; resident "
                r"memory MiB by node \{0: \d+, 1: \d+, 2: \d+, 3: \d+\} \(total (\d+) MiB\)",
                facts,
            )
            assert match, facts
            assert asyncio.run(listed_brokers(line.removeprefix("bootstrap.servers="))) == [1, 2, 3]
            for address in addresses:
                host, port = address.rsplit(":", 1)
                assert 68 in probe_api_keys(host, int(port)), f"{address} speaks KIP-848"
            process.send_signal(signal.SIGINT)
            assert wait_or_dump(process, timeout_s=60) == 0, process.stderr.read()
        finally:
            if process.poll() is None:  # a failed check: do not wait for Ctrl-C
                process.kill()
    for address in addresses:
        host, port = address.rsplit(":", 1)
        with pytest.raises(OSError, match="refused|reset|closed"):
            probe_api_keys(host, int(port), timeout_s=1.0)
    print(f"\nkgm broker start --brokers 3: {facts}")  # noqa: T201 - the figures, for the report


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--detach"], "--detach runs one broker only"),
        (["--port", "9092"], "--port applies to one broker only"),
        (["--brokers", "12"], "--brokers takes 1 to 9, got 12"),
    ],
)
def test_kgm_broker_start_brokers_refuses_bad_options(extra: list[str], complaint: str) -> None:
    """The command refuses before it starts anything, so its entry point is called in this
    process (a new interpreter per case cost seconds each on the loaded CI machine)."""
    argv = ["broker", "start", *(extra if "--brokers" in extra else ["--brokers", "3", *extra])]
    with pytest.raises(SystemExit) as refused:
        cli.main(argv)
    assert complaint in str(refused.value.code)
