"""Rebalance listeners of a service that commits what it processed, every few records.

The service runs with ``enable.auto.commit=false``: it counts the records it processed and commits
their offsets itself every ``COMMIT_EVERY`` records. Between two commits, some records are
processed but not committed yet. When a partition is revoked, whoever gets it next starts at the
last committed offset, so ``on_revoke`` must commit what was processed on the revoked partitions
*before* letting them go.

``BuggyOffsetsListener`` forgets that commit: it only drops its state. Nothing fails, no error is
logged; after every rebalance the next owner quietly processes the same records again.
``OffsetsListener`` commits the revoked partitions' processed offsets synchronously in
``on_revoke`` (while this member still owns them), and commits nothing in ``on_lost`` (the
partitions may already belong to another member).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message, TopicPartition

#: Records processed between two periodic commits.
COMMIT_EVERY = 10

Key = tuple[str, int]


class OffsetsListener:
    """The fixed listener, and the poll-loop body that goes with it."""

    def __init__(self) -> None:
        #: Offset after the last processed record, per owned partition: what to commit.
        self.processed: dict[Key, int] = {}
        self.since_commit = 0

    # --- the poll loop ----------------------------------------------------------------------

    def loop(self, consumer: Any) -> None:
        """One turn of the poll loop: take a record, process it, commit every few records."""
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            return
        self.process(message)
        self.since_commit += 1
        if self.since_commit >= COMMIT_EVERY:
            self.commit(consumer, list(self.processed))
            self.since_commit = 0

    def process(self, message: Message) -> None:
        """The service's work on one record (here: remember how far it got)."""
        self.processed[(message.topic() or "", message.partition() or 0)] = (
            message.offset() or 0
        ) + 1

    def commit(self, consumer: Any, keys: list[Key]) -> None:
        """Commit the processed offsets of ``keys`` synchronously."""
        offsets = [TopicPartition(t, p, self.processed[(t, p)]) for t, p in keys]
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=False)

    # --- the rebalance listener -------------------------------------------------------------

    def on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """New partitions start at the group's committed offsets: nothing to set up."""

    def on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Commit what was processed on the revoked partitions, then forget them."""
        revoked = [(tp.topic, tp.partition) for tp in partitions]
        self.commit(consumer, [key for key in revoked if key in self.processed])
        for key in revoked:
            self.processed.pop(key, None)

    def on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Lost partitions may already be another member's: forget them, commit nothing."""
        for tp in partitions:
            self.processed.pop((tp.topic, tp.partition), None)


class BuggyOffsetsListener(OffsetsListener):
    """The same service with the bug: ``on_revoke`` drops the state without committing it."""

    def on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Forget the revoked partitions (and the records processed since the last commit)."""
        for tp in partitions:
            self.processed.pop((tp.topic, tp.partition), None)
