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

import asyncio
import contextlib
import heapq
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from consumer._bridge.member_events import MemberEvent, RebalanceEvent, wall_clock_ms
from consumer._client.consumer import Consumer
from consumer._group_admin.fetch import GroupAdmin, GroupNotFoundError
from consumer._group_admin.model import AssignedPartition, GroupDescription
from consumer.errors import ConsumerError
from consumer.testing.plotting import plot
from consumer.testing.real.broker import LocalBroker
from consumer.testing.real.kafka_jars import (
    DEFAULT_KAFKA_VERSION,
    cache_dir,
    resolve_kafka_jars,
)
from consumer.testing.recorder import record
from consumer.testing.timeline import Timeline

__all__ = ["LEGEND", "run_demo"]

DEMO_PARTITIONS: Final = 6
DEMO_RECORDS: Final = 6_000
#: Simulated processing time per record, so the work is still there when members join.
DEMO_WORK_S: Final = 0.002
DEMO_MEMBERS: Final = 3
CONVERGE_TIMEOUT_S: Final = 60.0
#: How often the coordinator's view is read (ConsumerGroupDescribe and friends).
COORDINATOR_REFRESH_S: Final = 0.25
#: How many characters of a member id are shown (ids are 22 characters of base64).
SHORT_ID_CHARS: Final = 8
#: How long a line is held so that lines from several threads print in time order.
ORDERING_DELAY_MS: Final = 400
#: How long the coordinator's view is still read after the members closed (to see them leave).
LEAVE_WATCH_S: Final = 3.0
#: Refreshes in a row that must fail before the demo says so (a fresh broker's coordinator
#: answers COORDINATOR_LOAD_IN_PROGRESS for a moment; that is not worth a line).
REPORTED_FAILURES: Final = 8

LEGEND: Final = (
    "legend: seconds since start | who: a member (its id, shortened) or the coordinator | "
    "what happened (why) | e=member epoch | owns=partitions held | "
    "target=partitions the coordinator assigned"
)


def _partitions_text(partitions: Iterable[int]) -> str:
    """``[0,1,2]`` from partition numbers."""
    return "[" + ",".join(str(p) for p in sorted(partitions)) + "]"


class _Narrator:
    """Prints the demo's lines in time order, timed from the start of the run.

    Members' events reach their listeners on the thread that polls, a moment after they
    happened, and the coordinator's view comes from another thread: each line is held for
    :data:`ORDERING_DELAY_MS` and lines are printed by the time they carry, not by arrival.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[int, int, str]] = []  # a heap of (at_ms, arrival, line)
        self._arrivals = 0
        self._stop = threading.Event()
        self._printer: threading.Thread | None = None
        self.t0_ms = wall_clock_ms()

    def start(self) -> None:
        """Start timing from now and printing held lines in the background."""
        self.t0_ms = wall_clock_ms()
        self._printer = threading.Thread(target=self._print_loop, name="demo-narrator")
        self._printer.start()

    def stop(self) -> None:
        """Print every held line and stop the background printing."""
        self._stop.set()
        if self._printer is not None:
            self._printer.join(10)
        self._flush(until_ms=None)

    def say(self, who: str, what: str, at_ms: int | None = None) -> None:
        """One line: seconds since the start, who (padded), what."""
        at = wall_clock_ms() if at_ms is None else at_ms
        line = f"{(at - self.t0_ms) / 1000:6.2f}s  {who:<21} {what}"
        with self._lock:
            self._arrivals += 1
            heapq.heappush(self._pending, (at, self._arrivals, line))

    def note(self, text: str) -> None:
        """A line without a time (progress, summaries), after every line held so far."""
        self._flush(until_ms=None)
        print(text, flush=True)

    def _print_loop(self) -> None:
        while not self._stop.wait(ORDERING_DELAY_MS / 4000):
            self._flush(until_ms=wall_clock_ms() - ORDERING_DELAY_MS)

    def _flush(self, until_ms: int | None) -> None:
        with self._lock:
            while self._pending and (until_ms is None or self._pending[0][0] <= until_ms):
                print(heapq.heappop(self._pending)[2], flush=True)


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
        return f"{self.name} ({self.member_id[:SHORT_ID_CHARS]})"


def _member_listener(member: _Member, narrator: _Narrator) -> Callable[[MemberEvent], None]:
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
            what = f"{event.kind} {_partitions_text(numbers)}"
            owns = f"owns={_partitions_text(member.owned)}"
            narrator.say(member.who, f"{what:<40} e={event.member_epoch:<3} {owns}", event.at_ms)
            return
        if event.current != event.previous:
            what = f"{event.previous} -> {event.current}"
        else:
            what = f"epoch {event.previous_epoch} -> {event.member_epoch}"
        why = "" if event.reason is None else f"  ({event.reason})"
        owns = f"owns={_partitions_text(member.owned)}"
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


class _CoordinatorView:
    """Reads the group as its coordinator sees it, on its own thread, and prints what changed
    for each member: epoch, assignment (what the coordinator believes it owns) and target."""

    def __init__(self, address: str, group_id: str, narrator: _Narrator) -> None:
        self._address, self._group_id, self._narrator = address, group_id, narrator
        self._stop = threading.Event()
        #: member id -> (who, epoch, owns, target) as last printed.
        self._seen: dict[str, tuple[str, int | None, str, str]] = {}
        self._group_epoch: int | None = None
        self._failures = 0
        self._leaving = False
        self._left = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-coordinator", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop reading, once the members are seen to have left (or after a few seconds)."""
        self._left.wait(LEAVE_WATCH_S)
        self._stop.set()
        self._thread.join(10)

    def expect_leaving(self) -> None:
        """The members are closing: from now on, an empty group ends the watch early."""
        self._leaving = True

    def _run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        async with GroupAdmin(
            self._address,
            admin_config={},
            security=None,
            client_id="kgm-demo-coordinator-view",
            timeout_ms=5_000,
        ) as admin:
            while not self._stop.is_set():
                at_ms = wall_clock_ms()
                try:
                    self.show(await admin.describe_group(self._group_id), at_ms)
                    self._failures = 0
                except GroupNotFoundError:
                    pass  # not created yet: the first member's heartbeat creates it
                except (ConsumerError, TimeoutError) as error:
                    self._failures += 1
                    if self._failures == REPORTED_FAILURES:
                        print(
                            f"kgm demo: reading the coordinator's view keeps failing: "
                            f"{type(error).__name__}: {error}",
                            file=sys.stderr,
                            flush=True,
                        )
                if self._leaving and not self._seen:
                    self._left.set()
                await asyncio.sleep(COORDINATOR_REFRESH_S)  # the refresh interval itself

    def show(self, description: GroupDescription, at_ms: int) -> None:
        """Print what changed since the last description."""
        say = self._narrator.say
        if description.group_epoch != self._group_epoch:
            self._group_epoch = description.group_epoch
            say("coordinator", f"group epoch {description.group_epoch}", at_ms)
        members = {m.member_id: m for m in description.members or ()}
        for member_id in sorted(self._seen.keys() - members.keys()):
            who = self._seen.pop(member_id)[0]
            say("coordinator", f"{who:<29} left the group", at_ms)
        for member_id, view in sorted(members.items(), key=lambda item: item[1].client_id):
            who = f"{view.client_id} ({_short(member_id)})"
            seen = (
                who,
                view.member_epoch,
                _numbers(view.assignment),
                _numbers(view.target_assignment),
            )
            if self._seen.get(member_id) == seen:
                continue
            self._seen[member_id] = seen
            _, epoch, owns, target = seen
            state = "reconciling" if owns != target else "in step"
            say(
                "coordinator",
                f"{who:<29} {state:<11} e={epoch!s:<3} owns={owns} target={target}",
                at_ms,
            )


def _short(member_id: str) -> str:
    return member_id[:SHORT_ID_CHARS]


def _numbers(partitions: tuple[AssignedPartition, ...] | None) -> str:
    return "-" if partitions is None else _partitions_text(p.partition for p in partitions)


@contextlib.contextmanager
def _cluster_address(bootstrap_servers: str | None, narrator: _Narrator) -> Iterator[str]:
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
    narrator = _Narrator()
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
    narrator: _Narrator,
    timeline: Timeline,
) -> tuple[list[_Member], bool]:
    """Start the members one by one, each once the group is balanced; stop them when every
    record was consumed. Returns the members and whether all of that happened in time."""
    narrator.start()
    coordinator = _CoordinatorView(address, group_id, narrator)
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


def _draw(timeline: Timeline, output_dir: Path | None, narrator: _Narrator) -> None:
    folder = output_dir or Path(tempfile.mkdtemp(prefix="kgm-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    events_path = folder / "timeline.jsonl"
    timeline.write_jsonl(events_path)
    try:
        image = plot(timeline, folder / "timeline.png", title="kgm demo: rebalance timeline")
    except ImportError:
        narrator.note(
            f"timeline events: {events_path}; to draw them: "
            f"pip install 'kafka-group-member[demo]' and kgm timeline plot {events_path}"
        )
        return
    narrator.note(f"rebalance timeline drawn to {image} (events: {events_path})")


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
