"""Session-wide test policy and the real broker every tier shares.

Under CI (``CI`` set) a skipped test fails the run: every tier, the real-broker ones included,
must actually execute there. Property tests (Hypothesis) replay a fixed, seeded set of examples
under CI, so the release gate never depends on which random cases a run happens to draw; outside
CI every run explores new random examples.

The real-broker fixtures come from the project's own pytest plugin
(:mod:`consumer.testing.pytest_plugin`, the one users get): one Kafka broker per test run, started
the first time a test asks for it, unless ``KAFKA_BOOTSTRAP_SERVERS`` points at an existing
cluster. Tests create their own uniquely named topics and groups, so they never depend on each
other's data.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import settings as hypothesis_settings

from tests.support import register_kio_strategies

if TYPE_CHECKING:  # imported here, the plugin module could no longer be assertion-rewritten
    from consumer.testing.pytest_plugin import TopicFactory

# The installed package's entry point registers the plugin under this same name, so this line
# only loads it when the package is not installed with its entry point (a plain checkout).
pytest_plugins = ["consumer.testing.pytest_plugin"]

# No per-example deadline: it is a timing assertion, and speed is measured in benchmarks, never
# in tests; on a loaded 2-core machine a fuzz example took 319 ms against the default 200 ms.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
hypothesis_settings.register_profile("dev", deadline=None)
register_kio_strategies()
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")


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


# Older names of the plugin's fixtures, kept so the tiers need no mass rename.
@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_bootstrap_servers: str) -> str:
    """``host:port`` of the cluster under test (the plugin's ``kafka_bootstrap_servers``)."""
    return kafka_bootstrap_servers


@pytest.fixture(scope="session")
def admin(kafka_admin: AdminClient) -> AdminClient:
    """A confluent-kafka admin client on the cluster under test (the plugin's ``kafka_admin``)."""
    return kafka_admin


@pytest.fixture
def unique_name(kafka_unique_name: Callable[[str], str]) -> Callable[[str], str]:
    """``unique_name("topic")`` -> ``topic-<test>-<hex>`` (the plugin's ``kafka_unique_name``)."""
    return kafka_unique_name


@pytest.fixture
def create_topic(kafka_topic_factory: TopicFactory) -> TopicFactory:
    """``create_topic(partitions=1, name=None)`` (the plugin's ``kafka_topic_factory``)."""
    return kafka_topic_factory
