"""The read-process-write stage of the exactly-once tests, shared by the in-process tests and the
member process that is killed (``exactly_once_child.py``).

A :class:`TransactionalStage` is one member of the group: ``consumer.Consumer`` reads a batch,
a transactional confluent-kafka ``Producer`` writes it to the output topic and commits the
batch's offsets in the same transaction with ``consumer_group_metadata()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from consumer import Consumer

#: Called with the batch after its records were produced, before its offsets go in.
BeforeCommit = Callable[[list[Message]], None]


class TransactionalStage:
    """One member of the read-process-write group: our consumer and a transactional producer."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        source: str,
        sink: str,
        *,
        transactional_id: str | None = None,
        on_assign: Callable[[Any, list[TopicPartition]], None] | None = None,
        on_revoke: Callable[[Any, list[TopicPartition]], None] | None = None,
    ) -> None:
        self.sink = sink
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        callbacks = {"on_assign": on_assign, "on_revoke": on_revoke}
        self.consumer.subscribe([source], **{k: v for k, v in callbacks.items() if v})
        self.transactional_id = transactional_id or f"eos-{uuid.uuid4().hex[:8]}"
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": self.transactional_id}
        )
        self.producer.init_transactions(30)
        self.aborted = 0
        self.committed = 0

    def step(self, before_commit: BeforeCommit | None = None) -> int:
        """Read a batch, write it and its offsets in one transaction; return the records read."""
        batch = [m for m in self.consumer.consume(50, 0.2) if m.error() is None]
        if not batch:
            return 0
        self.producer.begin_transaction()
        for message in batch:
            self.producer.produce(self.sink, message.value())
        if before_commit is not None:
            before_commit(batch)
        try:
            self.producer.send_offsets_to_transaction(
                next_offsets(batch), self.consumer.consumer_group_metadata(), 30
            )
            self.producer.commit_transaction(30)
            self.committed += len(batch)
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            # The group moved on between reading and committing: nothing of the batch is
            # visible; read it again from where it started if the partition is still ours.
            self.producer.abort_transaction(30)
            self.aborted += 1
            owned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
            for tp in first_offsets(batch):
                if (tp.topic, tp.partition) in owned:
                    self.consumer.seek(tp)
        return len(batch)

    def describe(self) -> str:
        """One line for a failure message: member, state, epoch, partitions, counts."""
        c = self.consumer
        return (
            f"{c.memberid()}: {c.state} epoch {c.member_epoch}, "
            f"owns {[tp.partition for tp in c.assignment()]}, "
            f"wrote {self.committed}, aborted {self.aborted}"
        )

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(10)


def next_offsets(batch: list[Message]) -> list[TopicPartition]:
    """Per partition of ``batch``: the offset after its last record (what to commit)."""
    last: dict[tuple[str, int], int] = {}
    for m in batch:
        key = (m.topic() or "", m.partition() or 0)
        last[key] = max(last.get(key, -1), m.offset() or 0)
    return [TopicPartition(t, p, offset + 1) for (t, p), offset in sorted(last.items())]


def first_offsets(batch: list[Message]) -> list[TopicPartition]:
    """Per partition of ``batch``: the offset of its first record (where to read it again)."""
    first: dict[tuple[str, int], int] = {}
    for m in batch:
        key = (m.topic() or "", m.partition() or 0)
        first.setdefault(key, m.offset() or 0)
    return [TopicPartition(t, p, offset) for (t, p), offset in sorted(first.items())]


def committed_output(bootstrap: str, sink: str) -> list[int]:
    """Every value of ``sink`` (one partition) visible to ``isolation.level=read_committed``."""
    reader = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        reader.assign([TopicPartition(sink, 0, 0)])
        values: list[int] = []
        while True:
            message = reader.poll(10.0)
            assert message is not None, "no end-of-partition event from the output topic"
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return values
            values.append(int(message.value()))
    finally:
        reader.close()
