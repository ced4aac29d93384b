"""Errors as confluent-kafka users handle them: the same assertions on ``confluent_kafka.Consumer``
(``group.protocol=consumer``) and on ``consumer.Consumer``, against the session's real broker.

Each test is parametrized over both clients; where the two differ on purpose, the test says
which client does what (and ``docs/migrating-from-confluent-kafka.md`` says why). Tests whose
behaviour does not depend on the group protocol also run ``consumer.Consumer`` with
``group.protocol=classic`` (``@ALSO_CLASSIC``): librdkafka's classic member behind our facade.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import consumer
from consumer.testing.real.broker import fast_group_settings
from consumer.testing.real.security import SecureBrokerSettings, secure_broker_settings
from tests.integration.consumer_support import ConsumerFactory
from tests.integration.security_support import grant_test_acls
from tests.support import CONFLUENT, OURS, OURS_CLASSIC, wait_until

pytestmark = pytest.mark.integration

_ASSIGNED_S = 30.0
#: Also run the test on our facade with ``group.protocol=classic``.
ALSO_CLASSIC = pytest.mark.parametrize("make", [CONFLUENT, OURS, OURS_CLASSIC], indirect=True)


@pytest.fixture(params=[CONFLUENT, OURS])
def make(request: pytest.FixtureRequest, kafka_bootstrap: str) -> Iterator[ConsumerFactory]:
    """A consumer factory for one client, closing what it made."""
    factory = ConsumerFactory(kafka_bootstrap, request.param)
    try:
        yield factory
    finally:
        factory.close_all()


def _code_raised(call: Callable[[], object]) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        call()
    error = caught.value.args[0]
    assert isinstance(error, KafkaError), f"args[0] is {error!r}, not a KafkaError"
    return error


def _subscribed(make: ConsumerFactory, topic: str, **config: Any) -> Any:
    """A consumer that owns ``topic``'s partition, with nothing consumed or stored."""
    client = make(
        {
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **config,
        }
    )
    client.subscribe([topic])

    def assigned() -> bool:
        client.poll(0.2)
        return bool(client.assignment())

    wait_until(assigned, _ASSIGNED_S, f"{make.impl}: an assignment of {topic}")
    return client


def test_the_error_types_are_confluent_kafkas() -> None:
    assert consumer.KafkaError is confluent_kafka.KafkaError
    assert consumer.KafkaException is confluent_kafka.KafkaException
    assert issubclass(consumer.ConsumerError, KafkaException)
    assert issubclass(consumer.BrokerError, KafkaException)
    assert issubclass(consumer.ConfigError, KafkaException)
    assert issubclass(consumer.ConfigError, ValueError)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"no.such.key": 1}, "no.such.key"),
        ({"enable.auto.comit": True}, "enable.auto.comit"),
        ({"fetch.min.bytes": "abc"}, "fetch.min.bytes"),
        ({"auto.offset.reset": "bogus"}, "auto.offset.reset"),
        # A classic-protocol key under an explicit group.protocol=consumer, even at its default
        # value (without group.protocol ours ignores it with a warning: see test_config_classic).
        (
            {"group.protocol": "consumer", "session.timeout.ms": 45000},
            "session.timeout.ms",
        ),
        (
            {"group.protocol": "consumer", "partition.assignment.strategy": "range"},
            "partition.assignment.strategy",
        ),
    ],
)
def test_a_config_error_is_a_kafka_exception_with_invalid_arg(
    make: ConsumerFactory, config: dict[str, Any], words: str
) -> None:
    error = _code_raised(lambda: make({"group.id": "g", **config}))
    assert error.code() == KafkaError._INVALID_ARG
    assert error.name() == "_INVALID_ARG"
    assert words in error.str()
    assert not error.fatal()
    assert not error.retriable()


@ALSO_CLASSIC
def test_a_missing_group_id_is_a_value_error(make: ConsumerFactory) -> None:
    with pytest.raises(ValueError, match="group.id"):
        make({})


@ALSO_CLASSIC
def test_a_synchronous_commit_with_nothing_stored_raises_no_offset(
    make: ConsumerFactory, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    client = _subscribed(make, topic)
    error = _code_raised(lambda: client.commit(asynchronous=False))
    assert error.code() == KafkaError._NO_OFFSET
    assert error.str() == "Commit failed: Local: No offset stored"


def test_an_asynchronous_commit_with_nothing_stored_reports_no_offset_to_on_commit(
    make: ConsumerFactory, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    reports: list[tuple[KafkaError | None, list[tuple[str, int, int]]]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        reports.append((error, [(tp.topic, tp.partition, tp.offset) for tp in partitions]))

    client = _subscribed(make, topic, on_commit=on_commit)
    assert client.commit() is None

    def reported() -> bool:
        client.poll(0.1)
        return bool(reports)

    wait_until(reported, 10.0, f"{make.impl}: on_commit called")
    error, partitions = reports[0]
    assert error is not None
    assert error.code() == KafkaError._NO_OFFSET
    assert partitions == [(topic, 0, OFFSET_INVALID)]


def test_a_commit_of_a_partition_that_does_not_exist_raises(
    make: ConsumerFactory, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    client = _subscribed(make, topic)
    error = _code_raised(
        lambda: client.commit(offsets=[TopicPartition(topic, 5, 1)], asynchronous=False)
    )
    # confluent-kafka sends it and raises the broker's per-partition error; ours refuses a
    # commit of a partition the member does not own before sending it (it could overwrite
    # another member's progress).
    expected = KafkaError._STATE if make.is_ours else KafkaError.UNKNOWN_TOPIC_OR_PART
    assert error.code() == expected, error


@ALSO_CLASSIC
def test_a_committed_offset_reads_back_after_a_synchronous_commit(
    make: ConsumerFactory, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    client = _subscribed(make, topic)
    committed = client.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [
        (topic, 0, 2, None)
    ]
    assert [tp.offset for tp in client.committed([TopicPartition(topic, 0)], timeout=10)] == [2]


@ALSO_CLASSIC
def test_watermarks_of_an_unknown_partition_raise_unknown_partition(
    make: ConsumerFactory, create_topic: Any
) -> None:
    topic = create_topic(partitions=1)
    client = make({"group.id": "g"})
    error = _code_raised(lambda: client.get_watermark_offsets(TopicPartition(topic, 7), 5.0))
    assert error.code() == KafkaError._UNKNOWN_PARTITION


def test_a_fatal_group_error_names_itself(make: ConsumerFactory, create_topic: Any) -> None:
    """UNSUPPORTED_ASSIGNOR from ConsumerGroupHeartbeat: confluent-kafka's ``poll()`` returns an
    error event ``_FATAL`` (once); ours raises it with the broker's code, ``fatal()`` true."""
    topic = create_topic(partitions=1)
    client = make({"group.id": f"g-{uuid.uuid4().hex[:8]}", "group.remote.assignor": "bogus"})
    client.subscribe([topic])
    seen: list[KafkaError] = []

    def failed() -> bool:
        try:
            message = client.poll(0.2)
        except KafkaException as exc:
            seen.append(exc.args[0])
            return True
        if message is not None and message.error() is not None:
            seen.append(message.error())
            return True
        return False

    wait_until(failed, _ASSIGNED_S, f"{make.impl}: the fatal error")
    error = seen[0]
    assert "not supported" in error.str()
    if make.is_ours:
        assert (error.code(), error.fatal()) == (KafkaError.UNSUPPORTED_ASSIGNOR, True)
    else:
        assert error.code() == KafkaError._FATAL


@ALSO_CLASSIC
def test_a_method_on_a_closed_consumer_raises_runtime_error(make: ConsumerFactory) -> None:
    client = make({"group.id": "g"})
    client.close()
    with pytest.raises(RuntimeError, match="(?i)closed"):
        client.poll(0.1)
    assert client.close() is None  # a second close() is a no-op in both


# ----------------------------------------------------------------------------------------------
# Authorization errors, on a broker with StandardAuthorizer (``bob`` has no rights on groups,
# ``carol`` none on topics: see ``security_support.py``)

_AUTH_USERS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2", "carol": "carol-Secret-3"}
_AUTH_ERROR_S = 30.0


@pytest.fixture(scope="module")
def acl_broker(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SecureBrokerSettings, str]]:
    """A SASL_PLAINTEXT broker with ACLs, and a one-record topic on it (started once)."""
    settings = secure_broker_settings(
        Path(tmp_path_factory.mktemp("acl")),
        users=_AUTH_USERS,
        listeners=("SASL_PLAINTEXT",),
        acls=True,
    )
    with settings.broker(overrides=fast_group_settings()) as broker:
        grant_test_acls(settings, broker.bootstrap_servers)
        topic = f"guarded-{uuid.uuid4().hex[:8]}"
        admin_config = {"bootstrap.servers": broker.bootstrap_servers}
        admin = AdminClient(admin_config)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        producer = Producer(admin_config)
        producer.produce(topic, b"secret")
        assert producer.flush(30) == 0, "the record was not delivered within 30 s"
        yield settings, topic


def _first_authorization_error(
    make: ConsumerFactory, settings: SecureBrokerSettings, topic: str, user: str
) -> tuple[str, KafkaError, list[KafkaError]]:
    """Subscribe as ``user`` and poll as confluent-kafka's examples do (an error event is raised
    as ``KafkaException(msg.error())``); return how the first error arrived, the error, and what
    ``error_cb`` got by then and over two more seconds of polling (ten heartbeat intervals)."""
    reported: list[KafkaError] = []
    client = make(
        {
            **settings.client_config("SASL_PLAINTEXT", user=user, mechanism="SCRAM-SHA-256"),
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "error_cb": reported.append,
        }
    )
    client.subscribe([topic])
    deadline = time.monotonic() + _AUTH_ERROR_S
    while time.monotonic() < deadline and not reported:
        try:
            try:
                message = client.poll(0.5)
            except KafkaException:
                channel = "raised by poll()"
                raise
            channel = "error event from poll()"
            if message is not None and message.error() is not None:
                raise KafkaException(message.error())
            assert message is None, f"{make.impl}: a record delivered to {user}"
        except KafkaException as exc:
            _keep_polling(client, 2.0)
            return channel, exc.args[0], reported
    assert reported, f"{make.impl}: no error for {user} within {_AUTH_ERROR_S} s"
    return "error_cb", reported[0], reported


def _keep_polling(client: Any, duration_s: float) -> None:
    """Poll for ``duration_s``, whatever comes (so that ``error_cb`` gets what it would)."""
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        with contextlib.suppress(KafkaException):
            client.poll(0.1)


def test_no_rights_on_the_group_is_group_authorization_failed(
    make: ConsumerFactory, acl_broker: tuple[SecureBrokerSettings, str]
) -> None:
    """confluent-kafka: an error event from ``poll()`` (not fatal; FindCoordinator refused);
    ours: ``poll()`` raises it, fatal (as Java: the member cannot join)."""
    channel, error, _ = _first_authorization_error(make, *acl_broker, user="bob")
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    assert error.name() == "GROUP_AUTHORIZATION_FAILED"
    if make.is_ours:
        assert (channel, error.fatal()) == ("raised by poll()", True)
    else:
        assert (channel, error.fatal()) == ("error event from poll()", False)


def test_no_rights_on_the_topic_is_topic_authorization_failed(
    make: ConsumerFactory, acl_broker: tuple[SecureBrokerSettings, str]
) -> None:
    """Not fatal in both: the member stays and the error comes back with each heartbeat, as an
    error event from ``poll()``, never through ``error_cb``."""
    channel, error, reported = _first_authorization_error(make, *acl_broker, user="carol")
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    assert error.name() == "TOPIC_AUTHORIZATION_FAILED"
    assert error.str() == "ConsumerGroupHeartbeat failed: Broker: Topic authorization failed"
    assert not error.fatal()
    assert channel == "error event from poll()"
    assert [e for e in reported if e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED] == []


# ----------------------------------------------------------------------------------------------
# The poll timer

_MAX_POLL_INTERVAL_MS = 2000


@pytest.mark.parametrize("how", ["poll", "consume"])
def test_a_poll_gap_over_max_poll_interval_is_an_error_event(
    make: ConsumerFactory, create_topic: Any, how: str
) -> None:
    """The application stops polling for longer than ``max.poll.interval.ms``: the member leaves
    and the next ``poll()`` / ``consume()`` returns an error event ``_MAX_POLL_EXCEEDED`` (not
    fatal), never through ``error_cb``; the member then rejoins."""
    topic = create_topic(partitions=1)
    reported: list[KafkaError] = []
    client = _subscribed(
        make, topic, **{"max.poll.interval.ms": _MAX_POLL_INTERVAL_MS, "error_cb": reported.append}
    )
    # The stall under test (not a wait for a condition): 1.5 intervals without a poll.
    time.sleep(_MAX_POLL_INTERVAL_MS * 1.5 / 1000)
    events: list[KafkaError] = []

    def error_event() -> bool:
        messages = [client.poll(0.2)] if how == "poll" else client.consume(10, 0.2)
        events.extend(m.error() for m in messages if m is not None and m.error() is not None)
        return bool(events)

    wait_until(error_event, 10.0, f"{make.impl}: an error event after the poll gap")
    error = events[0]
    assert error.code() == KafkaError._MAX_POLL_EXCEEDED, error
    assert re.fullmatch(
        rf"Application maximum poll interval \({_MAX_POLL_INTERVAL_MS}ms\) exceeded by \d+ms",
        error.str(),
    ), error.str()
    assert (error.fatal(), error.retriable()) == (False, False)

    def rejoined() -> bool:
        client.poll(0.2)
        return bool(client.assignment())

    wait_until(rejoined, _ASSIGNED_S, f"{make.impl}: assigned again after the poll gap")
    assert [e for e in reported if e.code() == KafkaError._MAX_POLL_EXCEEDED] == []
