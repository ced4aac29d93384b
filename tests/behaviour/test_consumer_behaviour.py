"""What an application relies on from one consumer, checked identically on the real
``Consumer`` (against the session broker) and on ``FakeConsumer`` (on a ``SimCluster``):
callbacks inside ``poll()``, records and their fields, offset resets, commits, ``position()``,
``store_offsets()``, pause/resume, seek and errors. Group changes are in
``test_group_behaviour.py``.

Each test runs once per backend (``[real]`` and ``[fake]``, see ``conftest.py``). The fake must
behave as our real Consumer does; where that differs from ``confluent_kafka.Consumer``'s
documented behaviour, the test states our behaviour and says so in a comment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, TopicPartition

from consumer.config import ConfigError
from tests.behaviour.backends import (
    DEFAULT_BOUND_S,
    POLL_SLICE_S,
    Backend,
    Member,
    config,
    partitions_of,
    poll_for,
    poll_until,
    subscribed,
    wait_assigned,
)

pytestmark = pytest.mark.timeout(180)

#: OFFSET_INVALID: ``position()`` of a partition nothing was returned from yet.
OFFSET_INVALID = -1001


def produce_numbered(backend: Backend, topic: str, count: int, partition: int = 0) -> None:
    for n in range(count):
        backend.produce(topic, f"{n}".encode(), partition=partition)


def committed_offset(member: Member, topic: str, partition: int = 0) -> int:
    [result] = member.consumer.committed([TopicPartition(topic, partition)], timeout=30)
    return int(result.offset)


def offsets(member: Member, partition: int = 0) -> list[int]:
    return [m.offset() for m in member.records if m.partition() == partition]


def raised_by(call: Callable[[], object]) -> Exception | None:
    """The exception ``call()`` raised, or None."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the caller checks which one
        return error
    return None


# --- subscribe, records, reset ---------------------------------------------------------------


def test_on_assign_runs_inside_poll_with_every_partition(backend: Backend) -> None:
    topic = backend.create_topic(3)
    member = Member("m1", backend.consumer(config(backend)))
    assert member.consumer.assignment() == []
    member.subscribe([topic])
    assert member.callbacks == [], "callbacks run inside poll(), never inside subscribe()"

    wait_assigned(member, partitions_of(topic, 3))

    assert member.calls("assign") == [partitions_of(topic, 3)]
    assert member.calls("revoke") == []
    assert all(c.inside_poll for c in member.callbacks), member.callbacks


def test_records_arrive_in_offset_order_with_their_fields(backend: Backend) -> None:
    topic = backend.create_topic(2)
    for n in range(8):
        backend.produce(
            topic,
            f"v{n}".encode(),
            key=f"k{n}".encode(),
            partition=n % 2,
            headers=[("n", b"%d" % n)],
        )
    member = subscribed(backend, topic)

    poll_until([member], lambda: len(member.records) >= 8, "8 records")

    assert len(member.records) == 8
    for partition in (0, 1):
        records = [m for m in member.records if m.partition() == partition]
        assert [m.offset() for m in records] == [0, 1, 2, 3]
        numbers = range(partition, 8, 2)
        assert [m.value() for m in records] == [f"v{n}".encode() for n in numbers]
        assert [m.key() for m in records] == [f"k{n}".encode() for n in numbers]
        assert [m.headers() for m in records] == [[("n", b"%d" % n)] for n in numbers]
        assert {m.topic() for m in records} == {topic}
        stamps = [m.timestamp() for m in records]
        assert {kind for kind, _ms in stamps} == {TIMESTAMP_CREATE_TIME}
        assert all(isinstance(ms, int) and ms >= 0 for _kind, ms in stamps), stamps
        assert [ms for _k, ms in stamps] == sorted(ms for _k, ms in stamps)


def test_a_record_without_key_value_or_headers_reads_back_as_none(backend: Backend) -> None:
    topic = backend.create_topic(1)
    backend.produce(topic, None, partition=0)
    backend.produce(topic, b"", key=b"", partition=0, headers=[])
    member = subscribed(backend, topic)

    poll_until([member], lambda: len(member.records) >= 2, "2 records")

    tombstone, empty = member.records
    assert (tombstone.key(), tombstone.value(), tombstone.headers()) == (None, None, None)
    assert (empty.key(), empty.value()) == (b"", b"")
    assert empty.headers() is None, "no headers read back as None, not []"


def test_consume_returns_records_in_offset_order(backend: Backend) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 5)
    member = subscribed(backend, topic)
    batches: list[list[Any]] = []
    for _ in range(int(DEFAULT_BOUND_S / POLL_SLICE_S)):
        batch = member.consumer.consume(5, POLL_SLICE_S)
        if batch:
            batches.append(batch)
        if sum(len(b) for b in batches) >= 5:
            break

    records = [m for batch in batches for m in batch]
    assert all(len(batch) <= 5 for batch in batches)
    assert [m.offset() for m in records] == [0, 1, 2, 3, 4]
    assert [m.value() for m in records] == [b"0", b"1", b"2", b"3", b"4"]


def test_auto_offset_reset_earliest_reads_what_was_there_before(backend: Backend) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 3)
    member = subscribed(backend, topic, **{"auto.offset.reset": "earliest"})

    poll_until([member], lambda: len(member.records) >= 3, "3 records")

    assert offsets(member) == [0, 1, 2]


def test_auto_offset_reset_latest_skips_what_was_there_before(backend: Backend) -> None:
    topic = backend.create_topic(1)
    for n in range(3):
        backend.produce(topic, f"old{n}".encode(), partition=0)
    member = subscribed(backend, topic, **{"auto.offset.reset": "latest"})
    wait_assigned(member, {(topic, 0)})
    # When the end offset is looked up is not observable, so keep producing new records until
    # one arrives: none of the old ones may ever arrive.
    sent: list[int] = []

    def got_one() -> bool:
        if member.records:
            return True
        backend.produce(topic, f"new{len(sent)}".encode(), partition=0)
        sent.append(len(sent))
        return False

    poll_until([member], got_one, "a record produced after the assignment")
    poll_for([member], 0.5)

    values = member.values()
    assert all(v is not None and v.startswith(b"new") for v in values), values
    assert offsets(member) == sorted(offsets(member))
    assert offsets(member)[0] >= 3


# --- offsets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["sync", "async", "message", "offsets"])
def test_commit_then_committed(backend: Backend, how: str) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 5)
    reports: list[tuple[KafkaError | None, list[tuple[str, int, int]]]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        reports.append((error, [(tp.topic, tp.partition, tp.offset) for tp in partitions]))

    member = subscribed(backend, topic, **{"enable.auto.commit": False, "on_commit": on_commit})
    poll_until([member], lambda: len(member.records) >= 5, "5 records")
    consumer = member.consumer
    assert committed_offset(member, topic) == OFFSET_INVALID

    if how == "sync":
        result = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in result] == [(topic, 0, 5)]
        expected = 5
    elif how == "async":
        assert consumer.commit(asynchronous=True) is None
        expected = 5
    elif how == "message":
        result = consumer.commit(message=member.records[2], asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in result] == [(topic, 0, 3)]
        expected = 3
    else:
        result = consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in result] == [(topic, 0, 2)]
        expected = 2

    if how == "async":
        # The result reaches on_commit inside a later poll(), not inside commit().
        assert reports == []
        poll_until([member], lambda: reports, "on_commit for the async commit")
        assert reports == [(None, [(topic, 0, 5)])]
    else:
        assert reports == [], "on_commit ran inside a synchronous commit()"
    assert committed_offset(member, topic) == expected


def test_a_new_member_of_the_group_starts_at_the_committed_offset(backend: Backend) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 5)
    group = backend.unique("group")
    first = Member(
        "first", backend.consumer(config(backend, group, **{"enable.auto.commit": False}))
    )
    first.subscribe([topic])
    poll_until([first], lambda: len(first.records) >= 5, "5 records")
    first.consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    first.close()

    second = Member("second", backend.consumer(config(backend, group)))
    second.subscribe([topic])
    poll_until([second], lambda: len(second.records) >= 2, "the records after the commit")
    poll_for([second], 0.5)

    # Not from auto.offset.reset=earliest (offset 0): from the group's committed offset.
    assert offsets(second) == [3, 4]


def test_position_is_the_next_offset_to_return(backend: Backend) -> None:
    topic = backend.create_topic(2)
    produce_numbered(backend, topic, 4, partition=0)
    member = subscribed(backend, topic)
    poll_until([member], lambda: len(member.records) >= 4, "4 records")

    result = member.consumer.position([TopicPartition(topic, 0), TopicPartition(topic, 1)])

    # Nothing was returned from partition 1, so its position is OFFSET_INVALID.
    assert [(tp.topic, tp.partition, tp.offset) for tp in result] == [
        (topic, 0, 4),
        (topic, 1, OFFSET_INVALID),
    ]


def test_store_offsets_are_what_auto_commit_commits(backend: Backend) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 5)
    member = subscribed(
        backend,
        topic,
        **{
            "enable.auto.commit": True,
            "enable.auto.offset.store": False,
            "auto.commit.interval.ms": 100,
        },
    )
    poll_until([member], lambda: len(member.records) >= 5, "5 records")

    member.consumer.store_offsets(message=member.records[2])
    poll_until([member], lambda: committed_offset(member, topic) == 3, "auto-commit of offset 3")
    poll_for([member], 0.5)  # several more auto-commit intervals
    assert committed_offset(member, topic) == 3, "only stored offsets are committed"

    member.consumer.store_offsets(offsets=[TopicPartition(topic, 0, 4)])
    poll_until([member], lambda: committed_offset(member, topic) == 4, "auto-commit of offset 4")


# --- fetch control ----------------------------------------------------------------------------


def test_pause_stops_delivery_and_resume_restarts_it(backend: Backend) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 2)
    member = subscribed(backend, topic)
    poll_until([member], lambda: len(member.records) >= 2, "2 records")

    member.consumer.pause(member.consumer.assignment())
    backend.produce(topic, b"2", partition=0)
    backend.produce(topic, b"3", partition=0)
    poll_for([member], 1.0)
    assert member.values() == [b"0", b"1"], "a paused partition returned records"

    member.consumer.resume(member.consumer.assignment())
    poll_until([member], lambda: len(member.records) >= 4, "the records after resume")
    assert member.values() == [b"0", b"1", b"2", b"3"]
    assert offsets(member) == [0, 1, 2, 3]


def test_seek_delivers_again_from_the_offset(backend: Backend) -> None:
    topic = backend.create_topic(1)
    produce_numbered(backend, topic, 5)
    member = subscribed(backend, topic)
    poll_until([member], lambda: len(member.records) >= 5, "5 records")

    member.consumer.seek(TopicPartition(topic, 0, 1))
    poll_until([member], lambda: len(member.records) >= 9, "the records after the seek")

    assert offsets(member) == [0, 1, 2, 3, 4, 1, 2, 3, 4]
    assert member.values()[5:] == [b"1", b"2", b"3", b"4"]


# --- errors -----------------------------------------------------------------------------------


def test_a_synchronous_commit_with_nothing_to_commit_raises_no_offset(backend: Backend) -> None:
    topic = backend.create_topic(1)
    member = subscribed(backend, topic, **{"enable.auto.commit": False})
    wait_assigned(member, {(topic, 0)})

    with pytest.raises(KafkaException) as raised:
        member.consumer.commit(asynchronous=False)

    assert raised.value.args[0].code() == KafkaError._NO_OFFSET


def test_an_asynchronous_commit_with_nothing_to_commit_reports_no_offset(
    backend: Backend,
) -> None:
    """As confluent-kafka: no exception; ``on_commit`` gets ``_NO_OFFSET`` from a later poll."""
    topic = backend.create_topic(1)
    reports: list[tuple[KafkaError | None, list[tuple[str, int, int]]]] = []

    def on_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        reports.append((error, [(tp.topic, tp.partition, tp.offset) for tp in partitions]))

    member = subscribed(backend, topic, **{"enable.auto.commit": False, "on_commit": on_commit})
    wait_assigned(member, {(topic, 0)})

    assert member.consumer.commit(asynchronous=True) is None
    assert reports == []
    poll_until([member], lambda: reports, "on_commit for the empty commit")
    error, partitions = reports[0]
    assert error is not None
    assert error.code() == KafkaError._NO_OFFSET
    assert partitions == [(topic, 0, OFFSET_INVALID)]


def test_methods_after_close_raise_runtime_error(backend: Backend) -> None:
    topic = backend.create_topic(1)
    tp = TopicPartition(topic, 0, 0)
    with backend.consumer(config(backend)) as consumer:
        member = Member("m1", consumer)
        member.subscribe([topic])
        wait_assigned(member, {(topic, 0)})

    calls = {
        "poll": lambda: consumer.poll(0),
        "consume": lambda: consumer.consume(1, 0),
        "commit": lambda: consumer.commit(asynchronous=False),
        "committed": lambda: consumer.committed([tp], timeout=5),
        "position": lambda: consumer.position([tp]),
        "assignment": lambda: consumer.assignment(),
        "subscribe": lambda: consumer.subscribe([topic]),
        "unsubscribe": lambda: consumer.unsubscribe(),
        "pause": lambda: consumer.pause([tp]),
        "resume": lambda: consumer.resume([tp]),
        "seek": lambda: consumer.seek(tp),
        "store_offsets": lambda: consumer.store_offsets(offsets=[tp]),
    }
    wrong = {}
    for name, call in calls.items():
        outcome = raised_by(call)
        if not isinstance(outcome, RuntimeError) or "closed" not in str(outcome):
            wrong[name] = outcome
    assert wrong == {}, "expected RuntimeError('... closed ...') from every method"
    assert consumer.close() is None, "a second close() is a no-op"


@pytest.mark.parametrize(("key", "value"), [("no.such.key", 1), ("auto.offset.reset", "sideways")])
def test_bad_config_raises_config_error_naming_the_key(
    backend: Backend, key: str, value: object
) -> None:
    # confluent-kafka raises KafkaException(_INVALID_ARG); ours raises ConfigError (a
    # ValueError) naming the key and what is allowed.
    with pytest.raises(ConfigError) as raised:
        backend.consumer({**config(backend), key: value})

    assert type(raised.value) is ConfigError
    assert repr(key) in str(raised.value), str(raised.value)
