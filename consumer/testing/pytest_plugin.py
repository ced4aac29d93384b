"""The pytest plugin of kafka-group-member: real-broker fixtures and the simulation seed.

Installed with the package (``pip install "kafka-group-member[testing]"``), pytest loads it by
itself through the ``pytest11`` entry point ``kafka_group_member`` (module
``pytest_kafka_group_member``, which registers this module under its own name); nothing needs to
go in a ``conftest.py``. A source checkout that is not installed can load it with
``pytest_plugins = ["consumer.testing.pytest_plugin"]`` in its top-level conftest, which is a
no-op when the installed entry point already registered it.

Fixtures (``pytest --fixtures`` shows their documentation):

* ``kafka_broker`` (session): the cluster under test, with ``.bootstrap_servers``. A
  :class:`~consumer.testing.real.broker.LocalBroker` started on first use and stopped at the end
  of the session, or the cluster named by ``$KAFKA_BOOTSTRAP_SERVERS`` when that is set.
* ``kafka_broker_overrides`` (session): extra ``server.properties`` of the local broker; override
  it in a ``conftest.py`` to change broker settings.
* ``kafka_bootstrap_servers`` (session), ``kafka_admin`` (session).
* ``kafka_unique_name``, ``kafka_topic``, ``kafka_topic_factory``, ``kafka_consumer_factory``,
  ``kafka_producer`` (per test).
* ``kgm_sim_seed``: the seed of simulated runs (``--kgm-sim-seed``, default 0).
* ``group_sim``: makes a :class:`consumer.testing.GroupSim` seeded with ``kgm_sim_seed`` (no
  broker, simulated time).

Every test that uses a real-broker fixture gets the ``real_kafka`` marker, so
``pytest -m "not real_kafka"`` runs the rest without a JVM.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    from consumer import Consumer
    from consumer.testing.sim.group import GroupSim

__all__ = [
    "BOOTSTRAP_ENV_VAR",
    "DEFAULT_SIM_SEED",
    "REAL_BROKER_FIXTURES",
    "REAL_KAFKA_MARKER",
    "ExternalKafka",
    "GroupSimFactory",
    "KafkaCluster",
    "TopicFactory",
]

#: Set it to ``host:port[,...]`` to test against an existing cluster instead of a local broker.
BOOTSTRAP_ENV_VAR = "KAFKA_BOOTSTRAP_SERVERS"
#: The simulation seed when ``--kgm-sim-seed`` is not given.
DEFAULT_SIM_SEED = 0
#: The marker every test that talks to a real broker through these fixtures carries.
REAL_KAFKA_MARKER = "real_kafka"
#: Fixtures that need a real broker (a test using any of them gets :data:`REAL_KAFKA_MARKER`).
REAL_BROKER_FIXTURES = frozenset(
    {
        "kafka_broker",
        "kafka_bootstrap_servers",
        "kafka_admin",
        "kafka_topic",
        "kafka_topic_factory",
        "kafka_consumer_factory",
        "kafka_producer",
    }
)

_SEED_OPTION = "--kgm-sim-seed"
_TOPIC_READY_TIMEOUT_S = 30.0
_FLUSH_TIMEOUT_S = 30.0


class KafkaCluster(Protocol):
    """What ``kafka_broker`` gives a test: where the cluster listens."""

    @property
    def bootstrap_servers(self) -> str:
        """``host:port[,host:port...]`` for ``bootstrap.servers``."""
        ...


@dataclass(frozen=True)
class ExternalKafka:
    """A cluster this session did not start (``$KAFKA_BOOTSTRAP_SERVERS``)."""

    bootstrap_servers: str


class TopicFactory(Protocol):
    """``kafka_topic_factory(partitions=1, name=None, config=None) -> topic name``."""

    def __call__(
        self,
        partitions: int = 1,
        name: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> str: ...


class GroupSimFactory(Protocol):
    """``group_sim(topics, **kwargs) -> GroupSim``: the keyword arguments of
    :class:`consumer.testing.GroupSim` except ``seed``, which comes from ``kgm_sim_seed``."""

    def __call__(self, topics: Mapping[str, int] | None = None, **kwargs: Any) -> GroupSim: ...


# --- options, markers, report ---------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-group-member")
    group.addoption(
        _SEED_OPTION,
        dest="kgm_sim_seed",
        type=int,
        default=None,
        metavar="SEED",
        help=f"seed of simulated group runs (the kgm_sim_seed fixture); default {DEFAULT_SIM_SEED}",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{REAL_KAFKA_MARKER}: talks to a real Kafka broker through the kafka-group-member "
        "fixtures (added automatically; deselect with -m 'not real_kafka')",
    )


def _seed(config: pytest.Config) -> int:
    value = config.getoption("kgm_sim_seed")
    return DEFAULT_SIM_SEED if value is None else int(value)


def pytest_report_header(config: pytest.Config) -> list[str]:
    external = os.environ.get(BOOTSTRAP_ENV_VAR)
    cluster = (
        f"{BOOTSTRAP_ENV_VAR}={external}" if external else "a local broker, started on first use"
    )
    return [f"kafka-group-member: sim seed {_seed(config)} ({_SEED_OPTION}); real Kafka: {cluster}"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if REAL_BROKER_FIXTURES.intersection(names):
            item.add_marker(REAL_KAFKA_MARKER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and "kgm_sim_seed" in getattr(item, "fixturenames", ()):
        seed = _seed(item.config)
        report.sections.append(
            ("kafka-group-member", f"simulation seed {seed}: replay with {_SEED_OPTION}={seed}")
        )
    return report


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def kgm_sim_seed(request: pytest.FixtureRequest) -> int:
    """The seed for simulated group runs: ``--kgm-sim-seed`` (default 0).

    It is printed in the report header, and with the failure of any test that used it, so a
    failing simulated run can be replayed exactly.
    """
    return _seed(request.config)


@pytest.fixture
def group_sim(kgm_sim_seed: int) -> GroupSimFactory:
    """Makes a simulated group (:class:`consumer.testing.GroupSim`) seeded with ``kgm_sim_seed``.

    ``group_sim({"orders": 6}, listener=MyListener)`` runs your own listener's callbacks in N
    simulated members under a manual clock: no broker, and the same seed gives the same run. A
    failing test that used it reports the seed to replay with ``--kgm-sim-seed``.
    """
    from consumer.testing.sim.group import GroupSim

    def make(topics: Mapping[str, int] | None = None, **kwargs: Any) -> GroupSim:
        if "seed" in kwargs:
            raise TypeError("group_sim() takes its seed from --kgm-sim-seed; do not pass seed=")
        return GroupSim(topics, seed=kgm_sim_seed, **kwargs)

    return make


@pytest.fixture(scope="session")
def kafka_broker_overrides() -> dict[str, str]:
    """Extra ``server.properties`` entries for the local broker (none by default).

    Override this fixture (session scope) in a ``conftest.py`` to change broker settings; the
    local broker already runs with fast group timings (500 ms heartbeats, 6 s sessions). It has
    no effect on a cluster given by ``KAFKA_BOOTSTRAP_SERVERS``.
    """
    return {}


@pytest.fixture(scope="session")
def kafka_broker(kafka_broker_overrides: dict[str, str]) -> Iterator[KafkaCluster]:
    """The Kafka cluster under test, shared by the whole session: ``.bootstrap_servers``.

    With ``KAFKA_BOOTSTRAP_SERVERS`` set, that cluster (nothing is started). Otherwise a single
    local Kafka 4.x node (``consumer.testing.real.LocalBroker``: a JVM from Maven Central jars,
    cached per user; needs Java 17+ and Maven) started the first time a test asks for it, ready
    once it answers the consumer group protocol, and stopped with its data at session end.
    """
    external = os.environ.get(BOOTSTRAP_ENV_VAR)
    if external:
        yield ExternalKafka(external)
        return
    from consumer.testing.real.broker import LocalBroker

    with LocalBroker(overrides=dict(kafka_broker_overrides)) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap_servers(kafka_broker: KafkaCluster) -> str:
    """``bootstrap.servers`` of the cluster under test (``kafka_broker.bootstrap_servers``)."""
    return kafka_broker.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap_servers: str) -> AdminClient:
    """A confluent-kafka ``AdminClient`` on the cluster under test (shared by the session)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka_bootstrap_servers})


@pytest.fixture
def kafka_unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names unique to this test: ``kafka_unique_name("orders")`` -> ``orders-<test>-<hex>``."""
    test_name = request.node.name.replace("[", "-").replace("]", "")[:40]

    def make(prefix: str) -> str:
        return f"{prefix}-{test_name}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def kafka_topic_factory(
    kafka_admin: AdminClient, kafka_unique_name: Callable[[str], str]
) -> TopicFactory:
    """Creates topics: ``kafka_topic_factory(partitions=6)`` returns a new topic's name.

    ``name`` (default: unique to the test) and ``config`` (topic configs such as
    ``{"retention.ms": "60000"}``) are optional. It returns once the topic's every partition has
    a leader in the cluster metadata. Topics are left on the cluster (a local broker's data
    goes with it at session end).
    """

    def create(
        partitions: int = 1,
        name: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> str:
        from confluent_kafka.cimpl import NewTopic

        if partitions < 1:
            raise ValueError(f"partitions must be at least 1, got {partitions}")
        topic = name or kafka_unique_name("topic")
        futures = kafka_admin.create_topics(
            [NewTopic(topic, partitions, 1, config=dict(config or {}))],
            operation_timeout=_TOPIC_READY_TIMEOUT_S,
        )
        futures[topic].result(timeout=_TOPIC_READY_TIMEOUT_S)
        _await_leaders(kafka_admin, topic, partitions)
        return topic

    return create


def _await_leaders(admin: AdminClient, topic: str, partitions: int) -> None:
    """Return once the metadata lists ``partitions`` partitions of ``topic``, each led."""
    deadline = time.monotonic() + _TOPIC_READY_TIMEOUT_S
    seen = "no metadata yet"
    while True:
        meta = admin.list_topics(topic, timeout=_TOPIC_READY_TIMEOUT_S).topics.get(topic)
        if meta is not None and meta.error is None:
            led = [p for p in meta.partitions.values() if p.leader >= 0 and p.error is None]
            if len(led) == partitions:
                return
            seen = f"{len(led)} of {partitions} partitions have a leader"
        if time.monotonic() >= deadline:
            limit = _TOPIC_READY_TIMEOUT_S
            raise TimeoutError(f"topic {topic!r} not ready after {limit:.0f} s: {seen}")
        time.sleep(0.05)  # metadata propagation is announced by nothing: look again shortly


@pytest.fixture
def kafka_topic(kafka_topic_factory: TopicFactory) -> str:
    """A new topic with one partition, named for this test (use ``kafka_topic_factory`` for
    more partitions)."""
    return kafka_topic_factory()


@pytest.fixture
def kafka_consumer_factory(
    kafka_bootstrap_servers: str, kafka_unique_name: Callable[[str], str]
) -> Iterator[Callable[..., Consumer]]:
    """Makes ``consumer.Consumer`` members on the cluster under test; closes them at teardown.

    ``kafka_consumer_factory(config=None, *, group_id=None)``: ``config`` holds librdkafka
    keys (``{"enable.auto.commit": False}``) and wins over the defaults, which are the cluster's
    ``bootstrap.servers``, ``auto.offset.reset=earliest`` and a ``group.id`` unique to the test.
    Pass the same ``group_id`` to put several members in one group. Members still open at the
    end of the test are closed (leaving the group), newest first.
    """
    from consumer import Consumer

    made: list[Consumer] = []

    def make(config: Mapping[str, Any] | None = None, *, group_id: str | None = None) -> Consumer:
        given = dict(config or {})
        if group_id is not None and "group.id" in given:
            raise ValueError("give the group either as group_id or as config['group.id'], not both")
        settings: dict[str, Any] = {
            "bootstrap.servers": kafka_bootstrap_servers,
            "group.id": group_id or kafka_unique_name("group"),
            "auto.offset.reset": "earliest",
            **given,
        }
        member = Consumer(settings)
        made.append(member)
        return member

    yield make
    _close_all(made)


def _close_all(members: list[Consumer]) -> None:
    first_error: BaseException | None = None
    for member in reversed(members):
        try:
            member.close()
        except Exception as exc:  # keep closing the others, then report the first failure
            first_error = first_error or exc
    if first_error is not None:
        raise first_error


@pytest.fixture
def kafka_producer(kafka_bootstrap_servers: str) -> Iterator[Producer]:
    """A confluent-kafka ``Producer`` on the cluster under test.

    Call ``flush()`` before expecting records to be readable. At teardown it is flushed, and the
    test errors if a record could not be delivered within 30 s.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_bootstrap_servers})
    yield producer
    undelivered = producer.flush(_FLUSH_TIMEOUT_S)
    close = getattr(producer, "close", None)  # confluent-kafka >= 2.13 has close()
    if callable(close):
        close()
    if undelivered:
        raise AssertionError(
            f"kafka_producer: {undelivered} record(s) still undelivered after {_FLUSH_TIMEOUT_S} s"
        )
