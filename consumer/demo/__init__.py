"""``kgm demo``: a consumer group converging on the local broker, member by member, explained.

It starts the local Kafka broker (unless a cluster is given), creates a 6-partition topic and
produces numbered records, then starts three :class:`consumer.Consumer` members one after the
other, each on its own thread. Two voices narrate, one line per event:

* each **member** reports every state transition as it happens (JOINING, RECONCILE_ASSIGNMENT,
  ACK_ASSIGNMENT, STABLE...), with the rules-table outcome that caused it, its member epoch and
  the partitions it owns, and every rebalance callback (partitions assigned, revoked): these come
  from :meth:`consumer.Consumer.add_member_listener`, stamped when they happened;
* the **coordinator** (the broker's view, read with ConsumerGroupDescribe a few times a second,
  as ``kgm group watch`` does) reports each member's epoch, what it believes the member owns, and
  the *target* it computed for it. A member reconciles its owned partitions towards its target,
  revoking before assigning, and epochs only move forward.

At the end each member's count of consumed records is printed (every record is consumed exactly
once across the group) and the run is drawn as a rebalance timeline (a PNG, with the testing
kit's :func:`consumer.testing.plotting.plot`; without matplotlib the demo says how to get it and
keeps the JSON-lines file, which ``kgm timeline plot`` draws later).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from consumer._bridge.member_events import MemberEvent, RebalanceEvent
from consumer._client.consumer import Consumer
from consumer.demo.narration import (
    LEGEND,
    CoordinatorView,
    Narrator,
    partitions_text,
    short_id,
)
from consumer.testing.plotting import plot
from consumer.testing.real.broker import LocalBroker
from consumer.testing.real.kafka_jars import (
    DEFAULT_KAFKA_VERSION,
    cache_dir,
    resolve_kafka_jars,
)
from consumer.testing.recorder import record
from consumer.testing.timeline import Timeline

__all__ = ["run_demo"]

DEMO_PARTITIONS: Final = 6
DEMO_RECORDS: Final = 6_000
#: Simulated processing time per record, so the work is still there when members join.
DEMO_WORK_S: Final = 0.002
DEMO_MEMBERS: Final = 3
CONVERGE_TIMEOUT_S: Final = 60.0


@dataclass
class _Member:
    name: str
    consumer: Consumer
    consumed: set[int] = field(default_factory=set)
    owned: set[int] = field(default_factory=set)
    member_id: str = ""
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def who(self) -> str:
        return f"{self.name} ({short_id(self.member_id)})"


def _member_listener(member: _Member, narrator: Narrator) -> Callable[[MemberEvent], None]:
    """Prints ``member``'s state transitions and rebalance callbacks as they happen."""

    def listen(event: MemberEvent) -> None:
        member.member_id = event.member_id
        if isinstance(event, RebalanceEvent):
            numbers = {partition for _, partition in event.partitions}
            if not numbers:
                return  # a callback with nothing in it (the round moved nothing here)
            if event.kind == "assigned":
                member.owned |= numbers
            else:
                member.owned -= numbers
            what = f"{event.kind} {partitions_text(numbers)}"
            owns = f"owns={partitions_text(member.owned)}"
            narrator.say(member.who, f"{what:<40} e={event.member_epoch:<3} {owns}", event.at_ms)
            return
        if event.current != event.previous:
            what = f"{event.previous} -> {event.current}"
        else:
            what = f"epoch {event.previous_epoch} -> {event.member_epoch}"
        why = "" if event.reason is None else f"  ({event.reason})"
        owns = f"owns={partitions_text(member.owned)}"
        narrator.say(member.who, f"{what:<40} e={event.member_epoch:<3} {owns}{why}", event.at_ms)

    return listen


def _run_member(member: _Member, topic: str, changed: threading.Condition) -> None:
    member.consumer.subscribe([topic])
    while not member.stop.is_set():
        message = member.consumer.poll(0.1)
        if message is not None and message.error() is None:
            time.sleep(DEMO_WORK_S)  # the "processing" of this record
            member.consumed.add(int(message.value() or b"-1"))
        with changed:
            changed.notify_all()
    member.consumer.close()  # commits, revokes (printed) and leaves the group


@contextlib.contextmanager
def _cluster_address(bootstrap_servers: str | None, narrator: Narrator) -> Iterator[str]:
    """The cluster to use: the one given, else ``KAFKA_BOOTSTRAP_SERVERS``, else a local broker
    started here (with progress lines: the first run downloads Kafka's jars)."""
    address = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if address:
        narrator.note(f"using the Kafka cluster at {address}")
        yield address
        return
    version = os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    if not (cache_dir() / f"kafka-{version}" / "lib" / ".complete").exists():
        narrator.note(
            f"downloading the Apache Kafka {version} jars with Maven (first run only, about "
            f"a minute; cached in {cache_dir()}) ..."
        )
        started = time.monotonic()
        resolve_kafka_jars(version)
        narrator.note(f"  downloaded in {time.monotonic() - started:.0f} s")
    narrator.note(f"starting a local Kafka {version} broker (10 to 20 s) ...")
    started = time.monotonic()
    with LocalBroker(kafka_version=version) as broker:
        narrator.note(
            f"  broker ready in {time.monotonic() - started:.0f} s: "
            f"bootstrap.servers={broker.bootstrap_servers}"
        )
        yield broker.bootstrap_servers


def _create_topic_with_records(bootstrap_servers: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=DEMO_PARTITIONS)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20})
    for number in range(records):
        producer.produce(topic, value=str(number).encode(), partition=number % DEMO_PARTITIONS)
        if number % 10_000 == 0:
            producer.poll(0)
    producer.flush(30)


def run_demo(
    bootstrap_servers: str | None = None,
    *,
    records: int = DEMO_RECORDS,
    output_dir: Path | None = None,
) -> int:
    """Start (or use) a broker and show three members converging on a 6-partition topic.

    Args:
        bootstrap_servers: the cluster to use (default: ``KAFKA_BOOTSTRAP_SERVERS``, else a
            local broker started for the run).
        records: how many records to produce and consume (more records: a longer run).
        output_dir: where the timeline (``timeline.jsonl``, ``timeline.png``) is written
            (default: a new temporary folder).

    Returns 0 when every record was consumed exactly once, else 1.
    """
    if records < DEMO_PARTITIONS:
        raise ValueError(f"records must be at least {DEMO_PARTITIONS}, got {records}")
    narrator = Narrator()
    narrator.note(
        f"kgm demo: {DEMO_MEMBERS} members join one consumer group, one after the other, and "
        f"share a {DEMO_PARTITIONS}-partition topic.\nKIP-848: the broker's group coordinator "
        "computes each member's target assignment; a member revokes what it must give up "
        "before it gets new partitions."
    )
    suffix = uuid.uuid4().hex[:6]
    topic, group_id = f"demo-{suffix}", f"demo-group-{suffix}"
    with _cluster_address(bootstrap_servers, narrator) as address:
        _create_topic_with_records(address, topic, records)
        narrator.note(f"topic {topic}: {DEMO_PARTITIONS} partitions, {records} records")
        narrator.note(LEGEND)
        timeline = Timeline()
        members, ok = _run_group(address, topic, group_id, records, narrator, timeline)
    total = sum(len(m.consumed) for m in members)
    distinct = len(_union(members))
    for member in members:
        narrator.note(f"{member.name} consumed {len(member.consumed)} records")
    _draw(timeline, output_dir, narrator)
    narrator.note(
        f"group consumed {distinct} distinct records of {records}, "
        f"{total - distinct} more than once"
    )
    return 0 if ok and distinct == records and total == records else 1


def _run_group(
    address: str,
    topic: str,
    group_id: str,
    records: int,
    narrator: Narrator,
    timeline: Timeline,
) -> tuple[list[_Member], bool]:
    """Start the members one by one, each once the group is balanced; stop them when every
    record was consumed. Returns the members and whether all of that happened in time."""
    narrator.start()
    coordinator = CoordinatorView(address, group_id, narrator)
    coordinator.start()
    changed = threading.Condition()
    members: list[_Member] = []
    try:
        for index in range(DEMO_MEMBERS):
            name = f"member-{index + 1}"
            consumer = Consumer(
                {
                    "bootstrap.servers": address,
                    "group.id": group_id,
                    "client.id": name,
                    "auto.offset.reset": "earliest",
                }
            )
            member = _Member(name, consumer)
            # Listeners before subscribe(), so the very first transition (JOINING) is seen.
            consumer.add_member_listener(_member_listener(member, narrator))
            record(consumer, timeline, member=name)
            narrator.say(name, "starts and subscribes")
            member.thread = threading.Thread(
                target=_run_member, args=(member, topic, changed), name=name
            )
            member.thread.start()
            members.append(member)
            if not _wait_until(changed, lambda: _balanced(members)):
                return members, False
        if not _wait_until(changed, lambda: len(_union(members)) >= records):
            return members, False
        narrator.say("demo", "every record consumed: closing the members")
    finally:
        coordinator.expect_leaving()
        for member in members:
            member.stop.set()
        for member in members:
            assert member.thread is not None
            member.thread.join(30)
        coordinator.stop()
        narrator.stop()
    return members, True


def _draw(timeline: Timeline, output_dir: Path | None, narrator: Narrator) -> None:
    folder = output_dir or Path(tempfile.mkdtemp(prefix="kgm-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    events_path = folder / "timeline.jsonl"
    timeline.write_jsonl(events_path)
    narrator.note("drawing the rebalance timeline ...")
    try:
        image = plot(timeline, folder / "timeline.png", title="kgm demo: rebalance timeline")
    except ImportError:
        narrator.note(
            f"  matplotlib is not installed, so the timeline is kept as events: {events_path}\n"
            f"  to draw it: pip install 'kafka-group-member[demo]', then "
            f"kgm timeline plot {events_path}"
        )
        return
    narrator.note(f"  drawn to {image} (events: {events_path})")


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


def _wait_until(changed: threading.Condition, predicate: Callable[[], bool]) -> bool:
    with changed:
        if changed.wait_for(predicate, timeout=CONVERGE_TIMEOUT_S):
            return True
    print(
        f"kgm demo: the group did not get there within {CONVERGE_TIMEOUT_S:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return False
