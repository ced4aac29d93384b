"""``ShareConsumer``'s application side on a stub runtime (no thread, no network): the commit
callback runs on the calling thread with confluent's shapes and refuses consumer calls from
inside; RENEW keeps a record in flight, needs explicit mode and brokers that serve it; lock
deadlines per record; argument checks of the new methods."""

from __future__ import annotations

import collections
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import IllegalStateException, KafkaError, KafkaException, TopicPartition

import consumer.share_consumer._facade as facade
from consumer import SHARE_ACKNOWLEDGE_TYPE_RENEW, AcknowledgeType, ShareConsumer
from consumer._bridge.queues import ToApplication
from consumer._share_runtime import (
    Acknowledge,
    AcknowledgementsCompleted,
    FetchedRecord,
    RecordSource,
    SetSaslCredentials,
)
from consumer._wire.records import Record, TimestampType
from consumer.errors import error_for_code
from consumer.share.acknowledgements import TopicIdPartition

TOPIC_ID = uuid.UUID(int=7)
PARTITION = TopicIdPartition(TOPIC_ID, 0)
INVALID_RECORD_STATE = 121


class StubRuntime:
    """What the facade uses of ``ShareRuntime``; events sent are kept in ``sent``."""

    def __init__(self, *_: Any) -> None:
        self.sent: list[object] = []
        self.to_background = self
        self.to_application: ToApplication[object] = ToApplication()
        self.outcomes: collections.deque[AcknowledgementsCompleted] = collections.deque()
        self.renew_supported: bool | None = True
        self.acquisition_lock_timeout_ms: int | None = 15_000
        self.member_id = "m"
        self.finished = threading.Event()
        self.finished.set()

    def put(self, event: object) -> None:
        self.sent.append(event)

    def start(self) -> None:
        pass

    def join(self, timeout_s: float) -> None:
        pass


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facade, "ShareRuntime", StubRuntime)


def make(**extra: object) -> tuple[ShareConsumer, StubRuntime]:
    consumer = ShareConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", **extra})
    runtime = consumer._runtime
    assert isinstance(runtime, StubRuntime)
    return consumer, runtime


def deliver(runtime: StubRuntime, *offsets: int, deadline_s: float | None = 100.0) -> None:
    runtime.to_application.put(
        tuple(
            FetchedRecord(
                "t",
                PARTITION,
                Record(offset, 0, TimestampType.CREATE_TIME, None, b"v"),
                1,
                RecordSource(1, 0),
                deadline_s,
            )
            for offset in offsets
        )
    )


@pytest.mark.usefixtures("stub")
def test_callback_gets_confluent_shapes_on_the_calling_thread_and_refuses_calls() -> None:
    consumer, runtime = make()
    seen: list[tuple[dict[TopicPartition, set[int]], KafkaException | None, int]] = []
    refused: list[str] = []

    def callback(offsets: dict[TopicPartition, set[int]], error: KafkaException | None) -> None:
        seen.append((offsets, error, threading.get_ident()))
        for call in (lambda: consumer.poll(0), consumer.commit_async, consumer.memberid):
            try:
                call()
            except IllegalStateException as exc:
                refused.append(str(exc))

    consumer.set_acknowledgement_commit_callback(callback)
    runtime.outcomes.append(AcknowledgementsCompleted({("t", 0): frozenset({1, 2})}, None))
    runtime.outcomes.append(
        AcknowledgementsCompleted(
            {("t", 0): frozenset({3})}, error_for_code(INVALID_RECORD_STATE, "lock expired")
        )
    )
    consumer.subscribe(["t"])
    assert len(consumer.poll(0)) == 0
    assert [(offsets, None if e is None else e.args[0].code()) for offsets, e, _ in seen] == [
        ({TopicPartition("t", 0): {1, 2}}, None),
        ({TopicPartition("t", 0): {3}}, KafkaError.INVALID_RECORD_STATE),
    ]
    assert {thread for _, _, thread in seen} == {threading.get_ident()}
    assert len(refused) == 6
    assert all("callback" in text for text in refused)
    consumer.set_acknowledgement_commit_callback(None)
    runtime.outcomes.append(AcknowledgementsCompleted({("t", 0): frozenset({4})}, None))
    consumer.commit_async()
    assert len(seen) == 2, "no callback: outcomes are dropped"
    assert not runtime.outcomes
    with pytest.raises(TypeError, match="callable"):
        consumer.set_acknowledgement_commit_callback(42)  # type: ignore[arg-type]
    consumer.close()


@pytest.mark.usefixtures("stub")
def test_renew_keeps_the_record_in_flight_until_a_terminal_type() -> None:
    consumer, runtime = make(**{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["t"])
    deliver(runtime, 0, 1, deadline_s=100.0)
    first, second = consumer.poll(0)
    assert consumer.acquisition_lock_deadline(first) == 100.0
    assert consumer.acquisition_lock_timeout_ms() == 15_000
    consumer.acknowledge(first, SHARE_ACKNOWLEDGE_TYPE_RENEW)
    consumer.acknowledge(second, AcknowledgeType.ACCEPT)
    assert len(consumer.poll(0)) == 0, "a renewed record does not block poll"
    runtime.outcomes.append(
        AcknowledgementsCompleted(
            {("t", 0): frozenset({0})}, None, {("t", 0): frozenset({0})}, 130.0
        )
    )
    assert len(consumer.poll(0)) == 0
    assert consumer.acquisition_lock_deadline(first) == 130.0, "renewed deadline"
    consumer.acknowledge(first, AcknowledgeType.REJECT)
    with pytest.raises(IllegalStateException, match="not in flight"):
        consumer.acquisition_lock_deadline(first)
    assert not [
        e for e in runtime.sent if isinstance(e, Acknowledge) and 3 in [a[2] for a in e.acks]
    ]
    consumer.close()  # the REJECT goes with the close
    kinds = [
        int(kind) for e in runtime.sent if isinstance(e, Acknowledge) for _, _, kind, _ in e.acks
    ]
    assert kinds == [4, 1, 3]


@pytest.mark.usefixtures("stub")
def test_renew_needs_brokers_that_serve_it_and_a_known_type() -> None:
    consumer, runtime = make(**{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["t"])
    deliver(runtime, 0)
    (message,) = consumer.poll(0)
    runtime.renew_supported = False
    with pytest.raises(KafkaException, match="RENEW needs") as caught:
        consumer.acknowledge(message, SHARE_ACKNOWLEDGE_TYPE_RENEW)
    assert caught.value.args[0].code() == KafkaError._UNSUPPORTED_FEATURE
    with pytest.raises(ValueError, match="RENEW"):
        consumer.acknowledge(message, 5)
    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.close()


@pytest.mark.usefixtures("stub")
def test_set_sasl_credentials_checks_and_hides_the_password() -> None:
    plain, _ = make()
    with pytest.raises(ValueError, match="security.protocol"):
        plain.set_sasl_credentials("u", "p")
    plain.close()
    consumer, runtime = make(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "old",
        }
    )
    with pytest.raises(TypeError, match="username"):
        consumer.set_sasl_credentials(1, "p")  # type: ignore[arg-type]
    consumer.set_sasl_credentials("u2", "s3cr3t-value")
    (event,) = [e for e in runtime.sent if isinstance(e, SetSaslCredentials)]
    assert (event.username, event.password) == ("u2", "s3cr3t-value")
    assert "s3cr3t-value" not in repr(event)
    consumer.close()
    with pytest.raises(IllegalStateException, match="closed"):
        consumer.set_sasl_credentials("u", "p")


@pytest.mark.usefixtures("stub")
def test_a_poll_wakes_the_background_once_with_the_previous_polls_acks() -> None:
    consumer, runtime = make()
    consumer.subscribe(["t"])
    deliver(runtime, 0, 1)
    before = len(runtime.sent)
    assert [m.offset() for m in consumer.poll(0)] == [0, 1]
    assert runtime.sent[before:] == [Acknowledge((), polled=True)]
    deliver(runtime, 2)
    before = len(runtime.sent)
    assert [m.offset() for m in consumer.poll(0)] == [2]
    (event,) = runtime.sent[before:]
    assert isinstance(event, Acknowledge)
    assert event.polled
    assert [(offset, int(kind)) for _, offset, kind, _ in event.acks] == [(0, 1), (1, 1)]
    consumer.close()
