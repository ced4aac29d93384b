"""Fatal member errors reach the application, bounded in time, and name their cause.

Cases: an invalid regex (``^[``, which librdkafka already refuses in ``subscribe()``), a regex
that only the broker's RE2J engine refuses (a back-reference), an unknown server assignor, and a
group that has reached ``group.consumer.max.size``. Kafka 4.3 has no per-group config for the
maximum size (``describe_configs`` on a GROUP resource lists only heartbeat, session and
assignment-interval settings), so that case runs on a dedicated module broker started with
``group.consumer.max.size=1``.

How the error surfaces: librdkafka does not raise from ``poll()`` for a fatal heartbeat error; it
returns an error event (``Message.error().code() == KafkaError._FATAL``, whose ``fatal()`` is
False on the event itself) once, then ``poll()`` returns None. A raised exception is accepted too
(the brief for our member asks ``poll()`` to raise). Either way the text must name the cause (the
Kafka error name or the broker's description of it) and the member must be in state FATAL.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from callback_timeline import (
    all_partitions,
    wait_for_balanced,
)
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from consumer_support import (
    CONVERGENCE_S,
    ConsumerFactory,
    check_extras,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
)
from member_thread import (
    Group,
    MemberThread,
)

from consumer.testing.real.broker import LocalBroker
from tests.support import CONFLUENT

pytestmark = pytest.mark.integration

FATAL_WITHIN_S = 20.0

INVALID_REGEX = r"INVALID_REGULAR_EXPRESSION|regular expression|\bregex"
UNSUPPORTED_ASSIGNOR = r"UNSUPPORTED_ASSIGNOR|assignor or its version range is not supported"
GROUP_MAX_SIZE = r"GROUP_MAX_SIZE_REACHED|group has reached (its )?max(imum)? size"


@dataclass(frozen=True)
class Surfaced:
    """Where and how a fatal error reached the application."""

    where: str  # "subscribe", "poll raised" or "poll returned"
    text: str
    after_s: float


def is_fatal_event(error: KafkaError) -> bool:
    return bool(error.fatal()) or error.code() == KafkaError._FATAL


def first_fatal_error(consumer: Any, topics: list[str], within_s: float) -> Surfaced:
    """Subscribe and poll until a fatal error surfaces; fail after ``within_s``."""
    start = time.monotonic()
    try:
        consumer.subscribe(topics)
    except Exception as exc:  # noqa: BLE001 - any exception type may carry the cause
        return Surfaced("subscribe", f"{type(exc).__name__}: {exc}", time.monotonic() - start)
    seen: list[str] = []
    while time.monotonic() - start < within_s:
        try:
            message = consumer.poll(0.2)
        except Exception as exc:  # noqa: BLE001
            return Surfaced("poll raised", f"{type(exc).__name__}: {exc}", time.monotonic() - start)
        if message is None or message.error() is None:
            continue
        if is_fatal_event(message.error()):
            return Surfaced("poll returned", str(message.error()), time.monotonic() - start)
        seen.append(str(message.error()))
    raise AssertionError(f"no fatal error within {within_s}s; non-fatal errors seen: {seen}")


def assert_names_cause(surfaced: Surfaced, cause: str) -> None:
    assert re.search(cause, surfaced.text, re.IGNORECASE), (
        f"the error ({surfaced.where}) does not name its cause /{cause}/: {surfaced.text}"
    )


def assert_stays_fatal(factory: ConsumerFactory, consumer: Any) -> None:
    """After the fatal error the member stays out: FATAL (ours), ``poll()`` returns promptly."""
    check_extras(factory, consumer, state="FATAL")
    start = time.monotonic()
    try:
        message = consumer.poll(0.2)
    except Exception:  # noqa: BLE001 - raising again is fine; hanging or joining is not
        message = None
    assert time.monotonic() - start < 5, "poll() after a fatal error must not hang"
    assert message is None or message.error() is not None, "no records after a fatal error"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("pattern", "locally_refused"),
    [
        pytest.param("^[", True, id="unbalanced-bracket"),
        pytest.param(r"^(kgm)\1-.*", False, id="backreference-refused-by-broker"),
    ],
)
def test_invalid_regex_is_fatal(
    pattern: str,
    locally_refused: bool,
    make_consumer: ConsumerFactory,
    unique_name: Callable[[str], str],
) -> None:
    consumer = make_consumer({"group.id": unique_name("group")})
    try:
        surfaced = first_fatal_error(consumer, [pattern], FATAL_WITHIN_S)
        if locally_refused and make_consumer.impl == CONFLUENT:
            # librdkafka compiles the regex itself and refuses it with _INVALID_ARG, which does
            # not say "regex"; our member may do the same or leave it to the broker.
            assert "_INVALID_ARG" in surfaced.text, surfaced
        else:
            assert_names_cause(surfaced, INVALID_REGEX)
        if surfaced.where != "subscribe":
            assert_stays_fatal(make_consumer, consumer)
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_unknown_assignor_is_fatal(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=1)
    consumer = make_consumer(
        {"group.id": unique_name("group"), "group.remote.assignor": "does-not-exist"}
    )
    try:
        surfaced = first_fatal_error(consumer, [topic], FATAL_WITHIN_S)
        assert surfaced.where != "subscribe", "only the broker knows its assignors"
        assert_names_cause(surfaced, UNSUPPORTED_ASSIGNOR)
        assert_stays_fatal(make_consumer, consumer)
        assert not consumer.assignment(), "a fatal member owns nothing"
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def max_size_one_broker() -> Iterator[LocalBroker]:
    """A dedicated broker whose consumer groups hold at most one member."""
    with LocalBroker(overrides={"group.consumer.max.size": "1"}) as broker:
        yield broker


@pytest.mark.timeout(120)
def test_group_max_size_reached_is_fatal_for_the_newcomer_only(
    make_consumer: ConsumerFactory, max_size_one_broker: LocalBroker
) -> None:
    bootstrap = max_size_one_broker.bootstrap_servers
    topic = f"topic-max-size-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1)], operation_timeout=30
    )
    futures[topic].result(timeout=30)
    config = {"bootstrap.servers": bootstrap, "group.id": f"group-max-size-{uuid.uuid4().hex[:8]}"}
    group = Group()
    newcomer = make_consumer(config)
    try:
        first = group.add(MemberThread("first", make_consumer(config), [topic], group.timeline))
        wait_for_balanced(group.timeline, ["first"], all_partitions(topic, 2), CONVERGENCE_S)

        surfaced = first_fatal_error(newcomer, [topic], FATAL_WITHIN_S)
        assert surfaced.where != "subscribe", "only the broker knows the group is full"
        assert_names_cause(surfaced, GROUP_MAX_SIZE)
        assert_stays_fatal(make_consumer, newcomer)

        assert group.timeline.owned("first") == all_partitions(topic, 2)
        assert group.timeline.count("first", ["revoke", "lost"]) == 0, group.timeline.dump()
        assert not first.errors, f"the member already in the group is unaffected: {first.errors}"
        check_extras(make_consumer, first.consumer, state="STABLE")
    finally:
        newcomer.close()
        group.stop_all()
