"""Reliability tier: member processes behind fault proxies, faults, churn, fuzzing.

One proxied broker (one listener and one :class:`~consumer.testing.real.proxy.FaultProxy` per member
slot ``m1``..``m5``) serves the whole session; every test makes its own topic and group. Each run
prints its invariant counts (``[reliability] ...`` lines) straight to the terminal, and again in
a summary at the end, so CI logs show them without ``-s``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from fleet import (
    Fleet,
)
from reliability_support import (
    ProducedLog,
    create_topic,
)

from consumer.testing.real.proxy import ProxiedBroker

SLOTS = ("m1", "m2", "m3", "m4", "m5")
_COUNT_LINES: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "reliability: member processes, fault proxies, churn and fuzzing (tests/reliability)",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _COUNT_LINES:
        terminalreporter.section("reliability invariant counts")
        for line in _COUNT_LINES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def cluster() -> Iterator[ProxiedBroker]:
    """One broker with a proxied listener per member slot, for the whole session."""
    with ProxiedBroker(SLOTS) as started:
        yield started


@pytest.fixture(autouse=True)
def _healed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test starts and ends with open proxies (no fault left behind)."""
    yield
    if "cluster" in request.fixturenames:
        proxied: ProxiedBroker = request.getfixturevalue("cluster")
        for proxy in proxied.proxies.values():
            proxy.heal()
            proxy.delay(0)


@pytest.fixture(scope="session")
def admin(cluster: ProxiedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.direct_bootstrap_servers})


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``names("topic")`` -> ``topic-<test>-<hex>``."""
    test = request.node.name.replace("[", "-").replace("]", "")[:40]
    return lambda prefix: f"{prefix}-{test}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def show(capsys: pytest.CaptureFixture[str]) -> Callable[[str], None]:
    """Print a line to the real terminal (also collected for the end-of-run summary)."""

    def emit(line: str) -> None:
        _COUNT_LINES.append(line)
        with capsys.disabled():
            print("\n" + line, flush=True)

    return emit


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def make_fleet(
    cluster: ProxiedBroker, admin: AdminClient, names: Callable[[str], str], workdir: Path
) -> Iterator[Callable[..., tuple[Fleet, ProducedLog]]]:
    """``make_fleet(partitions, **member_defaults)`` -> a Fleet on a new topic and group, and
    its producer. Member processes left running are stopped at teardown."""
    made: list[Fleet] = []

    def make(partitions: int = 6, **defaults: object) -> tuple[Fleet, ProducedLog]:
        topic = names("t")
        create_topic(admin, topic, partitions)
        fleet = Fleet(cluster, workdir, topic, names("g"), partitions, **defaults)
        made.append(fleet)
        return fleet, ProducedLog(cluster.direct_bootstrap_servers, topic, partitions)

    yield make
    for fleet in made:
        for member in fleet.members:
            member.ensure_dead()
