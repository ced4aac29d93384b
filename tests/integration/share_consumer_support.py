"""Helpers of the ``test_share_consumer_*`` real-broker modules: producing, share-group configs,
and an acknowledgement commit callback that records what it is told."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from share_wire_support import set_share_group_configs

from consumer import ShareConsumer


def produce(bootstrap: str, topic: str, count: int, *, start: int = 0, partitions: int = 1) -> None:
    """``count`` records ``v<start>``..., spread round-robin over ``partitions``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(start, start + count):
        producer.produce(topic, value=f"v{index}".encode(), partition=index % partitions)
    assert producer.flush(30) == 0


def share_group(
    admin: AdminClient, unique_name: Callable[[str], str], *, lock_duration_ms: int
) -> str:
    """A new group id reading from the earliest offset with this record lock duration."""
    group_id = unique_name("share")
    set_share_group_configs(
        admin,
        group_id,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms=str(lock_duration_ms),
    )
    return group_id


@dataclass
class Outcome:
    """One call of the acknowledgement commit callback."""

    offsets: dict[tuple[str, int], set[int]]
    error_code: int | None
    thread: int


@dataclass
class CallbackLog:
    """An acknowledgement commit callback recording each call (and the calling thread)."""

    calls: list[Outcome] = field(default_factory=list)

    def __call__(
        self, offsets: dict[TopicPartition, set[int]], exception: KafkaException | None
    ) -> None:
        assert isinstance(offsets, dict)
        assert all(isinstance(tp, TopicPartition) for tp in offsets)
        code = None if exception is None else exception.args[0].code()
        self.calls.append(
            Outcome(
                {(tp.topic, tp.partition): set(numbers) for tp, numbers in offsets.items()},
                code,
                threading.get_ident(),
            )
        )

    def offsets(self, error_code: int | None = None) -> list[tuple[int, int]]:
        """(partition, offset) of every reported acknowledgement with this outcome, repeats
        kept."""
        return sorted(
            (partition, offset)
            for call in self.calls
            if call.error_code == error_code
            for (_, partition), numbers in call.offsets.items()
            for offset in numbers
        )

    def codes(self) -> set[int | None]:
        return {call.error_code for call in self.calls}


def poll_until(
    consumer: ShareConsumer, done: Callable[[list[Message]], bool], bound_s: float = 30.0
) -> list[Message]:
    """Poll (acknowledging nothing itself) until ``done(everything so far)``."""
    got: list[Message] = []
    deadline = time.monotonic() + bound_s
    while not done(got):
        assert time.monotonic() < deadline, f"only {len(got)} records within {bound_s} s: {got}"
        got.extend(consumer.poll(0.5))
    return got
