"""A ``ShareConsumer`` whose only broker is restarted (SIGKILL) while it consumes: the
acknowledgements of records acquired in the lost share session fail in the commit callback,
fetching resumes in a new session, and every record is ACCEPTed exactly once (redelivered when
its acknowledgement failed). The broker is this module's own, so the session broker other tests
use is not disturbed."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message
from confluent_kafka.admin import AdminClient, NewTopic
from share_consumer_support import CallbackLog, poll_until, produce, share_group

from consumer import ShareConsumer
from consumer.testing.real.broker import LocalBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS = 200
PARTITIONS = 2
LOCK_DURATION_MS = 5_000
#: Bound on consuming everything after the broker is back (it reloads its share state).
RESUME_BOUND_S = 120.0


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    with LocalBroker() as started:
        yield started


def test_broker_restart_fails_held_acks_and_every_record_is_accepted_once(
    broker: LocalBroker,
) -> None:
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    group_id = share_group(
        admin,
        lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}",
        share_record_lock_duration_ms=str(LOCK_DURATION_MS),
    )
    produce(bootstrap, topic, RECORDS, partitions=PARTITIONS)
    log = CallbackLog()
    deliveries: Counter[tuple[int, int]] = Counter()
    with ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 20,
        }
    ) as consumer:
        consumer.set_acknowledgement_commit_callback(log)
        consumer.subscribe([topic])

        def take(messages: list[Message], *, accept: bool = True) -> None:
            for message in messages:
                assert message.error() is None
                deliveries[(message.partition(), message.offset())] += 1
                if accept:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)

        deadline = time.monotonic() + RESUME_BOUND_S
        while sum(deliveries.values()) < RECORDS // 4:
            assert time.monotonic() < deadline, f"{sum(deliveries.values())} records delivered"
            take(list(consumer.poll(0.5)))
        held = poll_until(consumer, lambda got: len(got) >= 1)
        take(held, accept=False)
        broker.restart(hard=True)
        take(held)  # acquired in the lost session: these fail at once, unsent
        held_keys = {(m.partition(), m.offset()) for m in held}
        deadline = time.monotonic() + RESUME_BOUND_S
        while len(set(log.offsets())) < RECORDS:
            assert time.monotonic() < deadline, (
                f"{len(set(log.offsets()))} of {RECORDS} accepted after the restart; "
                f"outcomes {Counter(c.error_code for c in log.calls)}"
            )
            take(list(consumer.poll(0.5)))
        consumer.commit_sync(30)

    accepted = Counter(log.offsets())
    failed = {
        (partition, offset)
        for call in log.calls
        if call.error_code is not None
        for (_, partition), numbers in call.offsets.items()
        for offset in numbers
    }
    assert held_keys <= failed, "the held records' acknowledgements failed in the callback"
    assert set(accepted) == {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}
    assert max(accepted.values()) == 1, "no record ACCEPTed twice"
    redelivered = {key for key, count in deliveries.items() if count > 1}
    assert held_keys <= redelivered, "records whose ACCEPT failed came back"
    print(  # noqa: T201 - the figures of the run, for the report
        f"deliveries {sum(deliveries.values())} for {RECORDS} records; "
        f"{len(redelivered)} redelivered; failed ack reports "
        f"{Counter(c.error_code for c in log.calls if c.error_code is not None)}"
    )
