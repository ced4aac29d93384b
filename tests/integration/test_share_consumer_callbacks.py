"""``ShareConsumer``'s acknowledgement commit callback, lock deadlines and RENEW against the real
broker: outcomes arrive on the application thread from poll, commit_sync, commit_async and
close; consumer calls inside the callback raise; an ACCEPT after the lock expired (the record
went to another member) is reported as INVALID_RECORD_STATE; RENEW keeps a record from another
member for several lock durations and a later ACCEPT finishes it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import IllegalStateException, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from share_consumer_support import CallbackLog, poll_until, produce, share_group

from consumer import SHARE_ACKNOWLEDGE_TYPE_RENEW, AcknowledgeType, ShareConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

INVALID_RECORD_STATE = 121
EXPLICIT = {"share.acknowledgement.mode": "explicit"}


@pytest.fixture
def consumers() -> Iterator[list[ShareConsumer]]:
    made: list[ShareConsumer] = []
    yield made
    for consumer in made:
        consumer.close()


def make(
    consumers: list[ShareConsumer], bootstrap: str, group_id: str, **extra: object
) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group_id, **extra})
    consumers.append(consumer)
    return consumer


def test_callback_reports_poll_commit_sync_commit_async_and_close_on_the_app_thread(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    consumers: list[ShareConsumer],
) -> None:
    topic = create_topic(partitions=1)
    group_id = share_group(admin, unique_name, share_record_lock_duration_ms=str(30_000))
    produce(kafka_bootstrap, topic, 6)
    consumer = make(consumers, kafka_bootstrap, group_id, **{"max.poll.records": 3})
    log = CallbackLog()
    refused: list[Exception] = []

    def callback(offsets: dict[TopicPartition, set[int]], exception: object) -> None:
        log(offsets, exception)  # type: ignore[arg-type]
        try:
            consumer.poll(0)
        except IllegalStateException as exc:
            refused.append(exc)

    consumer.set_acknowledgement_commit_callback(callback)
    consumer.subscribe([topic])
    got = poll_until(consumer, lambda got: len(got) >= 6)  # implicit: each poll ACCEPTs the last
    assert consumer.commit_sync(30) == {TopicPartition(topic, 0): None}
    assert log.offsets() == [(0, offset) for offset in range(6)], "each ACCEPT reported once"
    assert log.codes() == {None}
    assert {call.thread for call in log.calls} == {threading.get_ident()}
    assert len(refused) == len(log.calls), "poll() inside the callback raised each time"
    assert "callback" in str(refused[0])
    assert sorted(m.offset() for m in got) == list(range(6))

    # commit_async: the outcome arrives at a later poll.
    produce(kafka_bootstrap, topic, 2, start=6)
    poll_until(consumer, lambda got: len(got) >= 2)
    consumer.commit_async()
    deadline = time.monotonic() + 30
    while log.offsets()[-2:] != [(0, 6), (0, 7)]:
        assert time.monotonic() < deadline, f"commit_async outcome not reported: {log.calls}"
        assert len(consumer.poll(0.2)) == 0, "nothing new was produced"
    # close: the last poll's records are ACCEPTed on the closing request and reported.
    produce(kafka_bootstrap, topic, 1, start=8)
    poll_until(consumer, lambda got: len(got) >= 1)
    consumer.set_acknowledgement_commit_callback(log)
    consumer.close()
    assert log.offsets() == [(0, offset) for offset in range(9)]
    assert log.codes() == {None}


def test_accept_after_the_lock_expired_is_reported_invalid_record_state(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    consumers: list[ShareConsumer],
) -> None:
    topic = create_topic(partitions=1)
    group_id = share_group(admin, unique_name, share_record_lock_duration_ms=str(1_000))
    produce(kafka_bootstrap, topic, 1)
    slow = make(consumers, kafka_bootstrap, group_id, **EXPLICIT)
    log = CallbackLog()
    slow.set_acknowledgement_commit_callback(log)
    slow.subscribe([topic])
    (held,) = poll_until(slow, lambda got: len(got) >= 1)
    assert slow.acquisition_lock_timeout_ms() == 1_000
    deadline = slow.acquisition_lock_deadline(held)
    assert deadline is not None
    assert 0 < deadline - time.monotonic() <= 1.0
    slow.unsubscribe()  # stop fetching; the record stays ours until its lock expires

    other = make(consumers, kafka_bootstrap, group_id, **EXPLICIT)
    other.subscribe([topic])
    (again,) = poll_until(other, lambda got: len(got) >= 1)
    assert (again.offset(), again.delivery_count()) == (0, 2), "redelivered after the expiry"

    slow.acknowledge(held, AcknowledgeType.ACCEPT)
    # The ACCEPT goes on the next request to the leader: the commit's ShareAcknowledge, or a
    # fetch that took it first (then the commit has nothing left to send); either way its
    # outcome reaches the callback, which commit_sync runs.
    deadline = time.monotonic() + 30
    while not log.calls:
        assert time.monotonic() < deadline, "the ACCEPT's outcome was not reported"
        for error in slow.commit_sync(30).values():
            assert error is not None
            assert error.args[0].code() == KafkaError.INVALID_RECORD_STATE
    assert [(c.offsets, c.error_code) for c in log.calls] == [
        ({(topic, 0): {0}}, INVALID_RECORD_STATE)
    ]
    other.acknowledge(again)
    assert other.commit_sync(30) == {TopicPartition(topic, 0): None}


def test_renew_keeps_the_record_for_several_lock_durations_then_accept_finishes_it(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    consumers: list[ShareConsumer],
) -> None:
    lock_s = 2.0
    topic = create_topic(partitions=1)
    group_id = share_group(
        admin, unique_name, share_record_lock_duration_ms=str(int(lock_s * 1000))
    )
    produce(kafka_bootstrap, topic, 1)
    holder = make(consumers, kafka_bootstrap, group_id, **EXPLICIT)
    log = CallbackLog()
    holder.set_acknowledgement_commit_callback(log)
    holder.subscribe([topic])
    (held,) = poll_until(holder, lambda got: len(got) >= 1)
    assert held.delivery_count() == 1
    # Subscribed only now: had it fetched first, it could hold the record in its buffer.
    other = make(consumers, kafka_bootstrap, group_id, **EXPLICIT)
    other.subscribe([topic])
    first_deadline = holder.acquisition_lock_deadline(held)
    assert first_deadline is not None
    started = time.monotonic()
    renewals = 0
    while time.monotonic() - started < 3 * lock_s:
        holder.acknowledge(held, SHARE_ACKNOWLEDGE_TYPE_RENEW)
        renewals += 1
        assert len(holder.poll(0.3)) == 0, "nothing else to deliver"  # sends the RENEW
        stolen = other.poll(0.3)
        assert len(stolen) == 0, (
            f"delivery count {stolen[0].delivery_count()}; "
            f"the renewed record stayed with its holder: {renewals} renewals, "
            f"{time.monotonic() - started:.1f} s, {log.calls}"
        )
    assert log.codes() == {None}, log.calls
    assert log.offsets()
    assert set(log.offsets()) == {(0, 0)}
    renewed_deadline = holder.acquisition_lock_deadline(held)
    assert renewed_deadline is not None
    assert renewed_deadline > first_deadline + lock_s, "the renewed lock deadline moved on"
    holder.acknowledge(held, AcknowledgeType.ACCEPT)
    assert holder.commit_sync(30) == {TopicPartition(topic, 0): None}
    with pytest.raises(IllegalStateException, match="not in flight"):
        holder.acknowledge(held, SHARE_ACKNOWLEDGE_TYPE_RENEW)
    end = time.monotonic() + 2 * lock_s
    while time.monotonic() < end:
        assert len(other.poll(0.3)) == 0, "ACCEPTed after RENEW: finished"
    assert renewals >= 3
