"""What an application relies on from a consumer, checked identically on the real ``Consumer``
(against the session broker) and on ``FakeConsumer`` (on a ``SimCluster``).

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
    Key,
    Member,
    Ownership,
    poll_for,
    poll_until,
)

pytestmark = pytest.mark.timeout(180)

#: OFFSET_INVALID: ``position()`` of a partition nothing was returned from yet.
OFFSET_INVALID = -1001


def config(backend: Backend, group: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "group.id": group or backend.unique("group"),
        "auto.offset.reset": "earliest",
        **extra,
    }


def subscribed(
    backend: Backend,
    topic: str,
    name: str = "m1",
    ownership: Ownership | None = None,
    **config_extra: Any,
) -> Member:
    member = Member(name, backend.consumer(config(backend, **config_extra)), ownership)
    member.subscribe([topic])
    return member


def partitions_of(topic: str, count: int) -> set[Key]:
    return {(topic, p) for p in range(count)}


def wait_assigned(member: Member, expected: set[Key]) -> None:
    poll_until(
        [member],
        lambda: member.owned == expected and member.assignment() == expected,
        f"{member.name} owning {sorted(expected)}",
        details=lambda: f"owned {sorted(member.owned)}, callbacks {member.callbacks}",
    )


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


# --- group membership -------------------------------------------------------------------------


def two_balanced_members(backend: Backend, partitions: int = 4) -> tuple[Member, Member, str]:
    """m1 alone owns every partition, then m2 joins and the group settles two and two."""
    topic = backend.create_topic(partitions)
    everything = partitions_of(topic, partitions)
    ownership = Ownership()
    group = backend.unique("group")
    m1 = Member("m1", backend.consumer(config(backend, group)), ownership)
    m1.subscribe([topic])
    wait_assigned(m1, everything)
    m2 = Member("m2", backend.consumer(config(backend, group)), ownership)
    m2.subscribe([topic])
    half = partitions // 2

    def balanced() -> bool:
        return (
            len(m1.owned) == half
            and len(m2.owned) == half
            and m1.owned | m2.owned == everything
            and m1.assignment() == m1.owned
            and m2.assignment() == m2.owned
        )

    poll_until(
        [m1, m2],
        balanced,
        "the group to settle two and two",
        details=lambda: f"m1 {m1.callbacks}\nm2 {m2.callbacks}",
    )
    return m1, m2, topic


def test_second_member_joining_moves_partitions_incrementally(backend: Backend) -> None:
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)

    assert m1.ownership.violations == []
    assert m1.owned.isdisjoint(m2.owned)
    assert m1.owned | m2.owned == everything
    # Incremental: m1 gives up only what moves and is never re-assigned what it keeps.
    assert m1.calls("assign") == [everything]
    revoked = set().union(*m1.calls("revoke"))
    assert revoked == m2.owned
    assert set().union(*m2.calls("assign")) == m2.owned
    assert m2.calls("revoke") == []
    assert all(c.inside_poll for c in m1.callbacks + m2.callbacks)


def test_close_leaves_and_the_other_member_gets_everything(backend: Backend) -> None:
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)
    leaving = set(m2.owned)

    m2.close()

    assert m2.calls("revoke")[-1] == leaving, "close() runs on_revoke for what it owned"
    assert m2.owned == set()
    wait_assigned(m1, everything)
    assert m1.ownership.violations == []
    for partition in range(4):
        backend.produce(topic, b"after-close", partition=partition)
    poll_until([m1], lambda: len(m1.records) >= 4, "records of every partition on m1")
    assert {m.partition() for m in m1.records} == set(range(4))


def test_unsubscribe_revokes_everything_and_stops_delivery(backend: Backend) -> None:
    m1, m2, topic = two_balanced_members(backend)
    everything = partitions_of(topic, 4)
    leaving = set(m2.owned)

    m2.consumer.unsubscribe()
    poll_until(
        [m1, m2],
        lambda: m2.assignment() == set() and m1.assignment() == everything,
        "m2 to hand everything to m1",
        details=lambda: f"m1 {m1.callbacks}\nm2 {m2.callbacks}",
    )

    assert m2.calls("revoke")[-1] == leaving
    assert m2.owned == set()
    assert m1.ownership.violations == []
    for partition in range(4):
        backend.produce(topic, b"after-unsubscribe", partition=partition)
    poll_until([m1, m2], lambda: len(m1.records) >= 4, "records of every partition on m1")
    assert m2.records == [], "an unsubscribed member returned records"


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_commit_with_nothing_to_commit_raises_no_offset(
    backend: Backend, asynchronous: bool
) -> None:
    topic = backend.create_topic(1)
    member = subscribed(backend, topic, **{"enable.auto.commit": False})
    wait_assigned(member, {(topic, 0)})

    # confluent-kafka raises only for a synchronous commit (an asynchronous one reports
    # _NO_OFFSET to on_commit); our Consumer raises for both.
    with pytest.raises(KafkaException) as raised:
        member.consumer.commit(asynchronous=asynchronous)

    assert raised.value.args[0].code() == KafkaError._NO_OFFSET


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
