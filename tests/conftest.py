"""Session-wide test policy and the real broker every tier shares.

Under CI (``CI`` set) a skipped test fails the run: every tier, the real-broker ones included,
must actually execute there. Property tests (Hypothesis) replay a fixed, seeded set of examples
under CI, so the release gate never depends on which random cases a run happens to draw; outside
CI every run explores new random examples.

One Kafka broker is started per test run (by :class:`consumer.testing.real.broker.LocalBroker`) the
first time a test asks for it, unless ``KAFKA_BOOTSTRAP_SERVERS`` points at an existing cluster.
Tests create their own uniquely named topics and groups, so they never depend on each other's data.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from hypothesis import settings as hypothesis_settings

from consumer.testing.real.broker import LocalBroker
from tests.support import register_kio_strategies

hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
register_kio_strategies()
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get("CI"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = reporter.stats.get("skipped", [])
    if skipped and exitstatus == 0:
        reporter.write_line(f"CI policy: {len(skipped)} test(s) were skipped; failing the run.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[LocalBroker | None]:
    """The broker this session started, or ``None`` when ``KAFKA_BOOTSTRAP_SERVERS`` is set."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield None
        return
    with LocalBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: LocalBroker | None) -> str:
    """``host:port`` of the cluster under test."""
    if kafka_broker is None:
        return os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    return kafka_broker.bootstrap_servers


@pytest.fixture(scope="session")
def admin(kafka_bootstrap: str) -> AdminClient:
    """A confluent-kafka admin client on the cluster under test."""
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Makes names unique to this test: ``unique_name("topic")`` -> ``topic-<test>-<hex>``."""
    test_name = request.node.name.replace("[", "-").replace("]", "")[:40]

    def make(prefix: str) -> str:
        return f"{prefix}-{test_name}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def create_topic(admin: AdminClient, unique_name: Callable[[str], str]) -> Callable[..., str]:
    """Creates a topic (unique name unless given) and waits until the broker confirms it."""

    def create(partitions: int = 1, name: str | None = None) -> str:
        topic = name or unique_name("topic")
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            operation_timeout=30,
        )
        futures[topic].result(timeout=30)
        return topic

    return create
