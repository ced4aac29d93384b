"""FakeConsumer on a SimCluster: the real Consumer's API, behaviour and errors, simulated time."""

from __future__ import annotations

import inspect
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

import consumer
from consumer._client.errors import CallbackMisuseError, ConsumerClosedError
from consumer.config import ConfigError
from consumer.testing import FakeConsumer, SimCluster

TOPIC = "orders"


def cluster_with(partitions: int = 3, records: int = 0, seed: int = 0) -> SimCluster:
    cluster = SimCluster(seed=seed)
    cluster.create_topic(TOPIC, partitions)
    for i in range(records):
        cluster.produce(TOPIC, f"v{i}", key=f"k{i}", partition=i % partitions)
    return cluster


def config(**extra: Any) -> dict[str, Any]:
    return {"group.id": "g", "auto.offset.reset": "earliest", **extra}


def drain(fake: FakeConsumer, polls: int = 20, timeout: float = 1.0) -> list[Message]:
    out = []
    for _ in range(polls):
        message = fake.poll(timeout)
        if message is not None:
            out.append(message)
    return out


def names(partitions: list[KafkaTopicPartition]) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in partitions]


def test_poll_returns_confluent_messages_of_every_partition_in_simulated_time() -> None:
    cluster = cluster_with(records=6)
    cluster.produce(TOPIC, b"raw", key=b"k", partition=0, headers={"h": b"1"}, timestamp_ms=77)
    fake = cluster.consumer(config())
    fake.subscribe([TOPIC])
    started = time.monotonic()
    messages = drain(fake)
    assert time.monotonic() - started < 1.0
    assert cluster.clock.now_ms >= 10_000  # the polls' timeouts were simulated time
    assert all(isinstance(m, Message) for m in messages)
    got = sorted((m.partition(), m.offset(), m.value()) for m in messages)
    assert got[:3] == [(0, 0, b"v0"), (0, 1, b"v3"), (0, 2, b"raw")]
    assert len(got) == 7
    raw = next(m for m in messages if m.value() == b"raw")
    assert raw.key() == b"k"
    assert raw.headers() == [("h", b"1")]
    assert raw.timestamp() == (1, 77)
    assert fake.state == "STABLE"
    assert fake.member_epoch > 0


def test_callbacks_run_only_inside_poll_on_the_callers_thread() -> None:
    cluster = cluster_with()
    calls: list[tuple[str, list[tuple[str, int]]]] = []
    fake = cluster.consumer(config())
    fake.subscribe(
        [TOPIC],
        on_assign=lambda c, ps: calls.append(("assign", names(ps))),
        on_revoke=lambda c, ps: calls.append(("revoke", names(ps))),
    )
    cluster.advance(30_000)
    assert calls == []  # no poll: the member does not even join (as Java since KAFKA-17154)
    fake.poll(0)
    assert calls == [("assign", [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)])]
    other = cluster.consumer(config())
    other.subscribe([TOPIC])
    other.poll(0)
    cluster.advance(30_000)  # the member learns of the new target and waits for the application
    assert fake.state == "RECONCILE_ASSIGNMENT"
    assert len(calls) == 1
    fake.poll(0)
    assert calls[1][0] == "revoke"
    assert [c.callback for c in cluster.callbacks][:2] == ["on_assign", "on_revoke"]


def test_second_member_takes_partitions_through_revoke_then_assign() -> None:
    cluster = cluster_with()
    log: list[tuple[str, str, list[tuple[str, int]]]] = []

    def listeners(name: str) -> dict[str, Any]:
        return {
            "on_assign": lambda c, ps: log.append((name, "assign", names(ps))),
            "on_revoke": lambda c, ps: log.append((name, "revoke", names(ps))),
        }

    a, b = cluster.consumer(config(), name="a"), cluster.consumer(config(), name="b")
    a.subscribe([TOPIC], **listeners("a"))
    drain(a, polls=3)
    b.subscribe([TOPIC], **listeners("b"))
    for _ in range(40):
        a.poll(0.2)
        b.poll(0.2)
    assert len(a.assignment()) + len(b.assignment()) == 3
    assert {len(a.assignment()), len(b.assignment())} == {1, 2}
    moved = next(entry for entry in log if entry[1] == "revoke")
    assert moved[0] == "a"
    assert log.index(moved) < log.index(("b", "assign", moved[2]))


def test_commit_sync_returns_partitions_and_committed_reads_them_back() -> None:
    cluster = cluster_with(records=6)
    fake = cluster.consumer(config(**{"enable.auto.commit": False}))
    fake.subscribe([TOPIC])
    drain(fake, polls=10, timeout=0.5)
    result = fake.commit(asynchronous=False)
    assert result is not None
    assert sorted((tp.partition, tp.offset) for tp in result) == [(0, 2), (1, 2), (2, 2)]
    committed = fake.committed([KafkaTopicPartition(TOPIC, p) for p in range(3)])
    assert [tp.offset for tp in committed] == [2, 2, 2]
    assert [c.offset for c in cluster.timeline.events() if type(c).__name__ == "Commit"] == [
        2,
        2,
        2,
    ]


def test_committed_works_before_joining_while_others_are_in_the_group() -> None:
    cluster = cluster_with(records=3)
    member = cluster.consumer(config(**{"enable.auto.commit": False}))
    member.subscribe([TOPIC])
    drain(member, polls=5, timeout=0.2)
    member.commit(asynchronous=False)
    outsider = cluster.consumer(config())
    offsets = outsider.committed([KafkaTopicPartition(TOPIC, p) for p in range(3)])
    assert [tp.offset for tp in offsets] == [1, 1, 1]


def test_async_commit_result_goes_to_on_commit_from_a_later_poll() -> None:
    cluster = cluster_with(records=3)
    results: list[tuple[KafkaError | None, list[tuple[str, int]]]] = []
    fake = cluster.consumer(
        config(
            **{
                "enable.auto.commit": False,
                "on_commit": lambda e, ps: results.append((e, names(ps))),
            }
        )
    )
    fake.subscribe([TOPIC])
    drain(fake, polls=5, timeout=0.5)
    assert fake.commit() is None
    assert results == []
    fake.poll(0)
    assert results == [(None, [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)])]
    assert [c.callback for c in cluster.callbacks][-1] == "on_commit"


def test_commit_errors_are_the_real_consumers() -> None:
    cluster = cluster_with(records=3)
    fake = cluster.consumer(config(**{"enable.auto.commit": False}))
    # Without a subscription: a commit as a non-member, accepted while the group is empty.
    no_member = fake.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 1)], asynchronous=False)
    assert [(tp.partition, tp.offset, tp.error) for tp in no_member or []] == [(0, 1, None)]
    fake.subscribe([TOPIC])
    drain(fake, polls=3, timeout=0.5)
    with pytest.raises(ValueError, match="not both"):
        fake.commit(message=Message(topic=TOPIC, partition=0, offset=0), offsets=[])
    with pytest.raises(KafkaException) as foreign:
        fake.commit(offsets=[KafkaTopicPartition("other", 0, 1)], asynchronous=False)
    assert foreign.value.args[0].code() == KafkaError._STATE
    assert fake.runtime is not None
    fake.runtime.faults.commit_errors.append(12)  # OFFSET_METADATA_TOO_LARGE: not retriable
    with pytest.raises(KafkaException) as refused:
        fake.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 1)], asynchronous=False)
    assert refused.value.args[0].code() == 12


def test_a_stale_member_epoch_fails_the_sync_commit_with_that_code() -> None:
    cluster = cluster_with(partitions=1, records=3)
    fake = cluster.consumer(config(**{"enable.auto.commit": False}))
    fake.subscribe([TOPIC])
    drain(fake, polls=5, timeout=0.2)
    assert fake.runtime is not None
    fake.runtime.faults.commit_errors.append(113)  # STALE_MEMBER_EPOCH
    with pytest.raises(KafkaException) as stale:
        fake.commit(asynchronous=False)
    assert stale.value.args[0].code() == 113
    result = fake.commit(asynchronous=False)  # the next one goes through
    assert result is not None
    assert [(tp.partition, tp.offset) for tp in result] == [(0, 3)]


def test_no_offsets_to_commit_raises_no_offset() -> None:
    cluster = cluster_with()
    fake = cluster.consumer(config(**{"enable.auto.commit": False}))
    fake.subscribe([TOPIC])
    drain(fake, polls=3, timeout=0.5)
    with pytest.raises(KafkaException) as caught:
        fake.commit(asynchronous=False)
    assert caught.value.args[0].code() == KafkaError._NO_OFFSET


def test_stalled_application_loses_its_partitions_through_on_lost() -> None:
    cluster = cluster_with()
    lost: list[list[tuple[str, int]]] = []
    fake = cluster.consumer(config(**{"max.poll.interval.ms": 10_000}))
    fake.subscribe([TOPIC], on_lost=lambda c, ps: lost.append(names(ps)))
    drain(fake, polls=3, timeout=0.5)
    assert len(fake.assignment()) == 3
    cluster.advance(11_000)  # no poll for longer than max.poll.interval.ms
    assert fake.state == "STALE"
    assert lost == []
    event = fake.poll(0)  # on_lost runs here; the member rejoins afterwards
    assert lost == [[(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]]
    # As confluent-kafka: the poll after the gap returns an error event, not fatal.
    assert event is not None
    error = event.error()
    assert error is not None
    assert (error.code(), error.fatal()) == (KafkaError._MAX_POLL_EXCEEDED, False)
    # 11 s of simulated time since the last poll: 1 s over the interval.
    assert error.str() == "Application maximum poll interval (10000ms) exceeded by 1000ms"
    drain(fake, polls=5, timeout=0.5)
    assert fake.state == "STABLE"
    assert len(fake.assignment()) == 3


def test_consume_after_a_poll_gap_returns_the_error_event_and_error_cb_gets_nothing() -> None:
    cluster = cluster_with()
    reported: list[KafkaError] = []
    fake = cluster.consumer(config(**{"max.poll.interval.ms": 10_000, "error_cb": reported.append}))
    fake.subscribe([TOPIC])
    drain(fake, polls=3, timeout=0.5)
    cluster.advance(10_500)
    messages = fake.consume(10, 0)
    errors = [m.error() for m in messages if m.error() is not None]
    assert [(e.code(), e.str()) for e in errors] == [
        (
            KafkaError._MAX_POLL_EXCEEDED,
            "Application maximum poll interval (10000ms) exceeded by 500ms",
        )
    ]
    assert fake.consume(10, 0) == []  # delivered once
    assert reported == []


def test_callback_exception_is_raised_from_poll() -> None:
    cluster = cluster_with()

    def broken(consumer: object, partitions: list[KafkaTopicPartition]) -> None:
        raise RuntimeError("listener bug")

    fake = cluster.consumer(config())
    fake.subscribe([TOPIC], on_assign=broken)
    with pytest.raises(RuntimeError, match="listener bug"):
        drain(fake, polls=5, timeout=0.5)


def test_misuse_inside_a_callback_and_after_close() -> None:
    cluster = cluster_with()
    seen: list[BaseException] = []

    def polls_inside(consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        try:
            consumer.poll(0)
        except CallbackMisuseError as exc:
            seen.append(exc)

    fake = cluster.consumer(config())
    fake.subscribe([TOPIC], on_assign=polls_inside)
    drain(fake, polls=3, timeout=0.5)
    assert len(seen) == 1
    with pytest.raises(KafkaException) as outside:  # manual assignment of an owned partition
        fake.incremental_assign([KafkaTopicPartition(TOPIC, 0)])
    assert outside.value.args[0].code() == KafkaError._CONFLICT
    fake.close()
    with pytest.raises(ConsumerClosedError):
        fake.poll(0)
    fake.close()  # idempotent


def test_close_revokes_commits_and_leaves() -> None:
    cluster = cluster_with(records=3)
    revoked: list[list[tuple[str, int]]] = []
    with cluster.consumer(config()) as fake:
        fake.subscribe([TOPIC], on_revoke=lambda c, ps: revoked.append(names(ps)))
        drain(fake, polls=6, timeout=0.5)
        member_id = fake.memberid()
    assert revoked == [[(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]]
    group = cluster.group("g")
    assert member_id not in group.members
    assert group.committed  # auto-commit committed before leaving
    assert all(offset == 1 for offset in group.committed.values())


def test_unsubscribe_revokes_and_leaves_but_the_consumer_stays_usable() -> None:
    cluster = cluster_with()
    revoked: list[list[tuple[str, int]]] = []
    fake = cluster.consumer(config())
    fake.subscribe([TOPIC], on_revoke=lambda c, ps: revoked.append(names(ps)))
    drain(fake, polls=3, timeout=0.5)
    fake.unsubscribe()
    drain(fake, polls=3, timeout=0.5)
    assert revoked == [[(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]]
    assert fake.state == "UNSUBSCRIBED"
    assert fake.assignment() == []


def test_pause_resume_seek_and_position() -> None:
    cluster = cluster_with(partitions=1, records=5)
    fake = cluster.consumer(config())
    fake.subscribe([TOPIC])
    first = fake.poll(2.0)
    assert first is not None
    assert first.offset() == 0
    tp = KafkaTopicPartition(TOPIC, 0)
    assert fake.position([tp])[0].offset == 1
    fake.pause([tp])
    assert fake.poll(0.5) is None
    fake.resume([tp])
    fake.seek(KafkaTopicPartition(TOPIC, 0, 3))
    again = fake.poll(0.5)
    assert again is not None
    assert again.offset() == 3
    fake.seek(KafkaTopicPartition(TOPIC, 0, OFFSET_BEGINNING))
    assert [m.offset() for m in fake.consume(10, 0.5)] == [0, 1, 2, 3, 4]
    assert fake.get_watermark_offsets(tp) == (0, 5)
    with pytest.raises(KafkaException) as unknown:
        fake.seek(KafkaTopicPartition(TOPIC, 7, 0))
    assert unknown.value.args[0].code() == KafkaError._STATE  # as the real one (librdkafka)


def test_on_assign_can_choose_start_offsets() -> None:
    cluster = cluster_with(partitions=1, records=5)

    def from_three(consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        consumer.incremental_assign(
            [KafkaTopicPartition(tp.topic, tp.partition, 3) for tp in partitions]
        )

    fake = cluster.consumer(config())
    fake.subscribe([TOPIC], on_assign=from_three)
    assert [m.offset() for m in drain(fake, polls=4, timeout=0.5)] == [3, 4]


def test_store_offsets_feeds_the_commit() -> None:
    cluster = cluster_with(partitions=1, records=5)
    fake = cluster.consumer(
        config(**{"enable.auto.commit": False, "enable.auto.offset.store": False})
    )
    fake.subscribe([TOPIC])
    messages = drain(fake, polls=7, timeout=0.5)
    fake.store_offsets(message=messages[1])
    result = fake.commit(asynchronous=False)
    assert result is not None
    assert [(tp.partition, tp.offset) for tp in result] == [(0, 2)]


def test_auto_offset_reset_latest_and_error() -> None:
    cluster = cluster_with(partitions=1, records=3)
    latest = cluster.consumer({"group.id": "latest"})
    latest.subscribe([TOPIC])
    assert drain(latest, polls=3, timeout=0.5) == []
    cluster.produce(TOPIC, "new", partition=0)
    assert [m.value() for m in drain(latest, polls=2, timeout=0.5)] == [b"new"]
    strict = cluster.consumer({"group.id": "strict", "auto.offset.reset": "error"})
    strict.subscribe([TOPIC])
    errors = [m.error() for m in drain(strict, polls=3, timeout=0.5)]
    assert [e.code() for e in errors if e is not None] == [KafkaError._AUTO_OFFSET_RESET]


def test_configuration_is_validated_like_the_real_consumer() -> None:
    cluster = cluster_with()
    with pytest.raises(ConfigError, match="group.id"):
        cluster.consumer({})
    with pytest.raises(ConfigError, match="max.poll.interval"):
        cluster.consumer({"group.id": "g", "max.poll.interval.ms": "soon"})
    with pytest.raises(ConfigError, match="did you mean"):
        cluster.consumer({"group.id": "g", "auto.ofset.reset": "earliest"})


def test_unsimulated_methods_raise_not_implemented_naming_themselves() -> None:
    fake = cluster_with().consumer(config())
    with pytest.raises(NotImplementedError, match="list_topics"):
        fake.list_topics()
    with pytest.raises(NotImplementedError, match="offsets_for_times"):
        fake.offsets_for_times([KafkaTopicPartition(TOPIC, 0, 0)])


def test_every_public_method_of_the_real_consumer_exists_with_its_parameters() -> None:
    for name, method in inspect.getmembers(consumer.Consumer):
        if name.startswith("_") and name not in ("__enter__", "__exit__"):
            continue
        fake = getattr(FakeConsumer, name, None)
        assert fake is not None, f"FakeConsumer lacks {name}"
        if callable(method) and not isinstance(method, type):
            real_params = list(inspect.signature(method).parameters)
            assert list(inspect.signature(fake).parameters)[: len(real_params)] == real_params, name


def test_same_seed_same_member_ids_and_timeline() -> None:
    def run(seed: int) -> tuple[list[str | None], list[object]]:
        cluster = cluster_with(records=9, seed=seed)
        fakes = [cluster.consumer(config()) for _ in range(2)]
        for fake in fakes:
            fake.subscribe([TOPIC])
        for _ in range(20):
            for fake in fakes:
                fake.poll(0.3)
        return [f.memberid() for f in fakes], cluster.timeline.events()

    assert run(5) == run(5)
    assert run(5)[0] != run(6)[0]


def test_regex_subscription_then_unsubscribe_then_subscribe_again() -> None:
    cluster = cluster_with(partitions=2)
    cluster.create_topic("other", 1)
    fake = cluster.consumer(config())
    fake.subscribe(["^ord.*"])
    drain(fake, polls=3, timeout=0.5)
    assert names(fake.assignment()) == [(TOPIC, 0), (TOPIC, 1)]
    fake.unsubscribe()
    drain(fake, polls=3, timeout=0.5)
    assert fake.assignment() == []
    fake.subscribe(["other"])
    drain(fake, polls=3, timeout=0.5)
    assert names(fake.assignment()) == [("other", 0)]
    assert fake.state == "STABLE"


def test_member_listeners_see_transitions_and_callbacks_in_simulated_time() -> None:
    from consumer import RebalanceEvent, StateTransition
    from consumer.testing import Timeline, record

    cluster = cluster_with(partitions=2)
    cluster.advance(7_000)  # so that simulated time cannot be mistaken for zero
    fake = cluster.consumer(config())
    events: list[object] = []
    fake.add_member_listener(events.append)
    timeline = Timeline(clock_ms=lambda: cluster.clock.now_ms)
    record(fake, timeline, member="m1")
    fake.subscribe(["orders"])
    drain(fake, polls=10)
    transitions = [e for e in events if isinstance(e, StateTransition)]
    assert [(t.previous, t.current) for t in transitions][:2] == [
        ("UNSUBSCRIBED", "JOINING"),
        ("JOINING", "RECONCILE_ASSIGNMENT"),
    ]
    assert transitions[-1].current == "STABLE"
    assert transitions[-1].member_epoch > 0
    assigned = [e for e in events if isinstance(e, RebalanceEvent) and e.kind == "assigned"]
    assert [p for e in assigned for p in e.partitions] == [("orders", 0), ("orders", 1)]
    stamps = [e.at_ms for e in events if isinstance(e, StateTransition | RebalanceEvent)]
    assert stamps == sorted(stamps)
    assert 7_000 <= stamps[0] <= cluster.clock.now_ms
    assert {type(e).__name__ for e in timeline.events()} >= {"StateChange", "Ownership"}
    fake.remove_member_listener(events.append)
    with pytest.raises(ValueError, match="not added"):
        fake.remove_member_listener(events.append)


def test_a_commit_in_on_revoke_covers_the_revoked_partitions() -> None:
    """As the real Consumer and confluent-kafka (tests/integration/test_commit_in_on_revoke.py)."""
    cluster = cluster_with(partitions=2, records=4)
    reports: list[tuple[object, list[tuple[int, int]]]] = []
    fake = cluster.consumer(
        config(
            **{
                "enable.auto.commit": False,
                "on_commit": lambda e, ps: reports.append(
                    (e, [(p.partition, p.offset) for p in ps])
                ),
            }
        )
    )
    fake.subscribe([TOPIC], on_revoke=lambda c, ps: c.commit(asynchronous=True))
    assert len(drain(fake, polls=10, timeout=0.5)) == 4
    fake.unsubscribe()
    drain(fake, polls=3, timeout=0.5)
    assert reports == [(None, [(0, 2), (1, 2)])]
