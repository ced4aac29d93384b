"""The README's main job: a consumer group converging on the local broker, member by member.

It starts the local Kafka broker (unless a cluster is given), creates a 6-partition topic and
produces numbered records, then starts three :class:`consumer.Consumer` members one after the
other. Each member runs on its own thread; the demo prints every member's state, epoch and
partitions whenever they change, so you can watch KIP-848 reconciliation (revoke before assign,
epochs moving forward) happen, and at the end how many records each member consumed. Every
record is consumed exactly once across the group.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from consumer._client.consumer import Consumer
from consumer.testing.real.broker import LocalBroker

DEMO_PARTITIONS = 6
DEMO_RECORDS = 6_000
#: Simulated processing time per record, so the work is still there when members join.
DEMO_WORK_S = 0.002
DEMO_MEMBERS = 3
CONVERGE_TIMEOUT_S = 60.0


@contextlib.contextmanager
def _cluster_address(bootstrap_servers: str | None) -> Iterator[str]:
    address = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if address:
        yield address
        return
    print("starting the local Kafka broker ...", flush=True)
    with LocalBroker() as broker:
        print(f"bootstrap.servers={broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers


def _create_topic_with_records(bootstrap_servers: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=DEMO_PARTITIONS)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20})
    for number in range(DEMO_RECORDS):
        producer.produce(topic, value=str(number).encode(), partition=number % DEMO_PARTITIONS)
        if number % 10_000 == 0:
            producer.poll(0)
    producer.flush(30)


@dataclass
class _Member:
    name: str
    consumer: Consumer
    consumed: set[int] = field(default_factory=set)
    last_view: str = ""
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def view(self) -> str:
        partitions = ",".join(str(tp.partition) for tp in self.consumer.assignment())
        return f"{self.consumer.state:<20} epoch {self.consumer.member_epoch:<3} [{partitions}]"


def _run_member(member: _Member, topic: str, changed: threading.Condition, t0: float) -> None:
    def say(what: str) -> None:
        with changed:
            print(f"{time.monotonic() - t0:6.2f}s  {member.name}  {what}", flush=True)
            changed.notify_all()

    def on_assign(_: Any, partitions: list[Any]) -> None:
        say(f"on_assign  {[tp.partition for tp in partitions]}")

    def on_revoke(_: Any, partitions: list[Any]) -> None:
        say(f"on_revoke  {[tp.partition for tp in partitions]}")

    member.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not member.stop.is_set():
        message = member.consumer.poll(0.1)
        if message is not None and message.error() is None:
            time.sleep(DEMO_WORK_S)  # the "processing" of this record
            member.consumed.add(int(message.value() or b"-1"))
            with changed:
                changed.notify_all()
        view = member.view()
        if view != member.last_view:
            member.last_view = view
            say(view)
    member.consumer.close()
    say("closed (committed, revoked, left the group)")


def run_demo(bootstrap_servers: str | None = None) -> int:
    """Start (or use) a broker and show three members converging on a 6-partition topic."""
    suffix = uuid.uuid4().hex[:6]
    topic, group_id = f"demo-{suffix}", f"demo-group-{suffix}"
    with _cluster_address(bootstrap_servers) as address:
        _create_topic_with_records(address, topic)
        print(f"topic {topic}: {DEMO_PARTITIONS} partitions, {DEMO_RECORDS} records", flush=True)
        changed, t0 = threading.Condition(), time.monotonic()
        members: list[_Member] = []
        for index in range(DEMO_MEMBERS):
            consumer = Consumer(
                {
                    "bootstrap.servers": address,
                    "group.id": group_id,
                    "client.id": f"member-{index + 1}",
                    "auto.offset.reset": "earliest",
                }
            )
            member = _Member(f"member-{index + 1}", consumer)
            member.thread = threading.Thread(
                target=_run_member, args=(member, topic, changed, t0), name=member.name
            )
            member.thread.start()
            members.append(member)
            _wait_until(changed, lambda: _balanced(members))
        _wait_until(changed, lambda: len(_union(members)) >= DEMO_RECORDS)
        for member in members:
            member.stop.set()
        for member in members:
            assert member.thread is not None
            member.thread.join(30)
        everything = _union(members)
        for member in members:
            print(f"{member.name} consumed {len(member.consumed)} records", flush=True)
        total = sum(len(m.consumed) for m in members)
        print(
            f"group consumed {len(everything)} distinct records of {DEMO_RECORDS}, "
            f"{total - len(everything)} more than once",
            flush=True,
        )
        return 0 if len(everything) == DEMO_RECORDS and total == DEMO_RECORDS else 1


def _union(members: list[_Member]) -> set[int]:
    # set.copy() runs under the GIL in one step, so it is safe while member threads add.
    return set().union(*(m.consumed.copy() for m in members))


def _balanced(members: list[_Member]) -> bool:
    sizes = [len(m.consumer.assignment()) for m in members]
    return (
        all(m.consumer.state == "STABLE" for m in members)
        and sum(sizes) == DEMO_PARTITIONS
        and max(sizes) - min(sizes) <= 1
    )


def _wait_until(changed: threading.Condition, predicate: Callable[[], bool]) -> None:
    with changed:
        if not changed.wait_for(predicate, timeout=CONVERGE_TIMEOUT_S):
            raise TimeoutError("the demo group did not converge in time")
