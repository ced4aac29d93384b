"""The orders service against a real Kafka broker, using only the kafka-group-member pytest
plugin's fixtures (``pip install "kafka-group-member[testing]"``; no conftest needed).

The plugin starts a local Kafka 4.x broker once per test session (or uses the cluster in
``KAFKA_BOOTSTRAP_SERVERS``); each test gets its own topics and consumer groups.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from orders_app import Order, OrdersApp

WAIT_S = 60.0
APP_CONFIG = {"enable.auto.commit": False}


def produce_orders(producer: Producer, topic: str, first: int, count: int, partitions: int) -> None:
    """Orders ``o-<first>`` .. (amount = number, in cents), spread over the partitions."""
    for number in range(first, first + count):
        value = Order.encode(f"o-{number}", number)
        producer.produce(topic, value, partition=number % partitions)
    assert producer.flush(30) == 0


def committed_offsets(admin: AdminClient, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets, as any admin tool sees them."""
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return [tp.offset for tp in sorted(result.topic_partitions, key=lambda tp: tp.partition)]


@pytest.fixture
def running() -> Iterator[list[tuple[OrdersApp, threading.Thread]]]:
    """Apps started on threads by a test; stopped and joined before the consumers close."""
    apps: list[tuple[OrdersApp, threading.Thread]] = []
    yield apps
    for app, _ in apps:
        app.stop()
    for _, thread in apps:
        thread.join(timeout=30)


def run_in_thread(app: OrdersApp, running: list[tuple[OrdersApp, threading.Thread]]) -> None:
    app.start()
    thread = threading.Thread(target=app.run, name=f"orders-{len(running)}", daemon=True)
    running.append((app, thread))
    thread.start()


def test_every_order_is_processed_and_its_offset_committed(
    kafka_topic_factory, kafka_producer, kafka_consumer_factory, kafka_admin, kafka_unique_name
) -> None:
    topic = kafka_topic_factory(partitions=3)
    group = kafka_unique_name("orders")
    produce_orders(kafka_producer, topic, first=0, count=30, partitions=3)
    seen: list[Order] = []
    app = OrdersApp(
        kafka_consumer_factory(APP_CONFIG, group_id=group), topic, seen.append, commit_every=7
    )
    app.start()

    deadline = time.monotonic() + WAIT_S
    while len(seen) < 30 and time.monotonic() < deadline:
        app.poll_once(0.5)  # poll() itself waits for records; no sleeping
    assert sorted(order.order_id for order in seen) == sorted(f"o-{n}" for n in range(30))
    assert {p: t.amount_cents for p, t in app.totals.items()} == {
        p: sum(n for n in range(30) if n % 3 == p) for p in range(3)
    }

    app.commit_processed(asynchronous=False)
    assert committed_offsets(kafka_admin, group, topic, 3) == [10, 10, 10]


class Seen:
    """Orders handled per app instance; the test waits on its condition."""

    def __init__(self) -> None:
        self.orders: dict[str, list[Order]] = {}
        self.changed = threading.Condition()

    def handler(self, instance: str) -> Callable[[Order], None]:
        self.orders[instance] = []

        def handle(order: Order) -> None:
            with self.changed:
                self.orders[instance].append(order)
                self.changed.notify_all()

        return handle

    def total(self) -> int:
        return sum(len(orders) for orders in self.orders.values())

    def wait_for_total(self, count: int) -> None:
        with self.changed:
            done = self.changed.wait_for(lambda: self.total() >= count, WAIT_S)
        assert done, f"{self.total()} of {count} orders processed after {WAIT_S:.0f} s"


def test_a_second_instance_takes_over_without_reprocessing(
    kafka_topic_factory,
    kafka_producer,
    kafka_consumer_factory,
    kafka_unique_name,
    running,
) -> None:
    """Periodic commits are off (``commit_every`` is huge): only the listener's commit on
    revoke stands between the new owner and orders the first instance already processed."""
    topic = kafka_topic_factory(partitions=4)
    group = kafka_unique_name("orders")
    seen = Seen()

    def instance(name: str) -> OrdersApp:
        member = kafka_consumer_factory(APP_CONFIG, group_id=group)
        return OrdersApp(member, topic, seen.handler(name), commit_every=10**9)

    a = instance("a")
    run_in_thread(a, running)
    produce_orders(kafka_producer, topic, first=0, count=40, partitions=4)
    seen.wait_for_total(40)

    b = instance("b")
    run_in_thread(b, running)
    assert b.wait_for(lambda: len(b.totals) == 2, WAIT_S), "the second instance got no share"
    assert a.wait_for(lambda: len(a.revoked) == 2, WAIT_S), "the first instance revoked nothing"
    moved = set(a.revoked)
    assert moved == set(b.totals), "what the first gave up is what the second got"
    assert set(a.totals) == set(range(4)) - moved

    produce_orders(kafka_producer, topic, first=40, count=40, partitions=4)
    seen.wait_for_total(80)

    ids = Counter(order.order_id for order in seen.orders["a"] + seen.orders["b"])
    assert [order_id for order_id, times in ids.items() if times > 1] == [], "reprocessed"
    assert set(ids) == {f"o-{n}" for n in range(80)}
    assert {order.partition for order in seen.orders["b"]} == moved
    assert a.lost == []
    assert b.lost == []
