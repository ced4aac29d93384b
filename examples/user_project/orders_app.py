"""Orders service: consumes "order" records, keeps a running total per partition, and commits the
offsets it has processed.

    python orders_app.py BOOTSTRAP TOPIC GROUP

This is application code as a Kafka developer writes it; ``tests/`` shows how to test it with the
kafka-group-member pytest plugin. An order's value is JSON, ``{"order_id": "o-1",
"amount_cents": 1250}``. The rebalance listener is where such services go wrong, so it follows
the three rules:

* on assign: start a fresh in-memory state for each new partition (the consumer resumes from the
  group's committed offset);
* on revoke: commit what was processed on the revoked partitions (synchronously, while this
  member still owns them), then drop their state. Without that commit the next owner re-reads
  everything since the last periodic commit;
* on lost: drop the state and do NOT commit; the partitions may already belong to another member,
  and the group would reject the commit anyway.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from consumer import Consumer


@dataclass(frozen=True)
class Order:
    """One order record."""

    order_id: str
    amount_cents: int
    partition: int
    offset: int

    @staticmethod
    def encode(order_id: str, amount_cents: int) -> bytes:
        """The record value of an order."""
        return json.dumps({"order_id": order_id, "amount_cents": amount_cents}).encode()


@dataclass
class PartitionTotals:
    """What this member processed on one partition since it was assigned."""

    orders: int = 0
    amount_cents: int = 0
    next_offset: int | None = None  # offset after the last processed record: what to commit


class OrdersApp:
    """The poll loop and rebalance listener of the orders service.

    ``consumer`` must have ``enable.auto.commit`` off: this app commits what it has processed,
    every ``commit_every`` orders (asynchronously) and on revoke (synchronously).
    ``handle_order`` is the business logic, called once per order on the polling thread.
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        handle_order: Callable[[Order], None],
        *,
        commit_every: int = 100,
    ) -> None:
        self.consumer = consumer
        self.topic = topic
        self.handle_order = handle_order
        self.commit_every = commit_every
        self.totals: dict[int, PartitionTotals] = {}
        self.revoked: list[int] = []
        self.lost: list[int] = []
        #: Notified whenever the app's state changes (an order processed, a rebalance).
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._since_commit = 0

    # --- the loop ---------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe with this app's rebalance listener."""
        self.consumer.subscribe(
            [self.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def poll_once(self, timeout_s: float = 0.5) -> None:
        """One turn of the loop: rebalance callbacks run inside ``poll``."""
        message = self.consumer.poll(timeout_s)
        if message is None:
            return
        if message.error() is not None:
            print(f"consumer error: {message.error()}", file=sys.stderr)
            return
        self._process(message)

    def run(self) -> None:
        """Poll until :meth:`stop` is called (from any thread)."""
        while not self._stop.is_set():
            self.poll_once(0.2)

    def stop(self) -> None:
        """Ask :meth:`run` to return after its current turn."""
        self._stop.set()

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Block until ``predicate()`` holds (checked at each change); False on timeout."""
        with self.changed:
            return self.changed.wait_for(predicate, timeout_s)

    # --- processing and commits -------------------------------------------------------------

    def _process(self, message: Any) -> None:
        body = json.loads(message.value())
        order = Order(
            body["order_id"], int(body["amount_cents"]), message.partition(), message.offset()
        )
        self.handle_order(order)
        with self.changed:
            totals = self.totals.setdefault(order.partition, PartitionTotals())
            totals.orders += 1
            totals.amount_cents += order.amount_cents
            totals.next_offset = order.offset + 1
            self.changed.notify_all()
        self._since_commit += 1
        if self._since_commit >= self.commit_every:
            self.commit_processed(asynchronous=True)

    def commit_processed(self, partitions: list[int] | None = None, *, asynchronous: bool) -> None:
        """Commit the processed offsets of ``partitions`` (default: all owned ones)."""
        offsets = []
        for partition in list(self.totals) if partitions is None else partitions:
            totals = self.totals.get(partition)
            if totals is not None and totals.next_offset is not None:
                offsets.append(TopicPartition(self.topic, partition, totals.next_offset))
        if offsets:
            self.consumer.commit(offsets=offsets, asynchronous=asynchronous)
        if partitions is None:
            self._since_commit = 0

    # --- rebalance listener -----------------------------------------------------------------

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.changed:
            for tp in partitions:
                self.totals[tp.partition] = PartitionTotals()
            self.changed.notify_all()

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        gone = [tp.partition for tp in partitions]
        self.commit_processed(gone, asynchronous=False)
        with self.changed:
            for partition in gone:
                self.totals.pop(partition, None)
            self.revoked.extend(gone)
            self.changed.notify_all()

    def _on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.changed:
            for tp in partitions:
                self.totals.pop(tp.partition, None)
            self.lost.extend(tp.partition for tp in partitions)
            self.changed.notify_all()


def main(bootstrap_servers: str, topic: str, group_id: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    app = OrdersApp(consumer, topic, lambda order: print(order, flush=True))
    app.start()
    try:
        app.run()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()  # runs on_revoke: the last processed offsets are committed


if __name__ == "__main__":
    main(*sys.argv[1:4])
