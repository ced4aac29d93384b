"""Shared helpers for the ``consumer.Consumer`` integration tests.

Every test builds its consumers through the ``make_consumer`` fixture (import
``make_consumer_fixture`` into the test module to make it available) or
:func:`build_consumer` (plain function, used by child processes). Which implementation they get is
chosen by the environment, never by a conftest:

* ``KGM_CONSUMER_IMPL=confluent``: ``confluent_kafka.Consumer({**config, "group.protocol":
  "consumer"})``, i.e. librdkafka's own KIP-848 member. The tests are developed and validated
  against it.
* anything else (the default, and what CI runs): ``consumer.Consumer(config)``, our member.

Helpers, in the order the tests use them: :class:`Timeline` (rebalance callbacks with
``time.monotonic()`` stamps, ownership intervals and the overlap check), :class:`MemberThread`
(one in-process member polling on its own thread), :func:`wait_until` (bounded condition wait),
:func:`produce_numbered` (records whose value is their sequence number) and :class:`ChildMember`
(a member in a child process, for SIGKILL tests; see ``member_child.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from confluent_kafka import KafkaError, Message, Producer, TopicPartition

IMPL_ENV_VAR = "KGM_CONSUMER_IMPL"
CONFLUENT = "confluent"
OURS = "ours"

#: Broker settings of the session broker (``consumer.testing.broker.fast_group_settings``).
SESSION_TIMEOUT_S = 6.0
HEARTBEAT_INTERVAL_S = 0.5

#: Generous bound for a group to settle after one membership change (join, leave, new topic).
CONVERGENCE_S = 30.0

MEMBER_CHILD_SCRIPT = Path(__file__).with_name("member_child.py")

Partition = tuple[str, int]
CallbackKind = Literal["assign", "revoke", "lost", "killed"]


# --------------------------------------------------------------------------------------------
# Implementation selection and the consumer factory
# --------------------------------------------------------------------------------------------


def selected_impl() -> str:
    """``"confluent"`` when ``KGM_CONSUMER_IMPL=confluent``, else ``"ours"``."""
    return CONFLUENT if os.environ.get(IMPL_ENV_VAR, "").strip().lower() == CONFLUENT else OURS


def build_consumer(config: Mapping[str, Any], impl: str | None = None) -> Any:
    """A consumer of implementation ``impl`` (default: :func:`selected_impl`) for ``config``."""
    chosen = impl or selected_impl()
    if chosen == CONFLUENT:
        from confluent_kafka import Consumer as ConfluentConsumer

        return ConfluentConsumer({**config, "group.protocol": "consumer"})
    if chosen != OURS:
        raise ValueError(f"unknown consumer implementation {chosen!r}")
    from consumer import Consumer  # lands with the facade (issue #4)

    return Consumer(dict(config))


def safe_close(consumer: Any) -> None:
    """``close()`` that tolerates an already closed (or broken) consumer."""
    try:
        consumer.close()
    except RuntimeError as exc:  # confluent: "Consumer closed"
        if "closed" not in str(exc).lower():
            raise
    except Exception:  # noqa: BLE001 - teardown must go on; the test has already reported
        pass


class ConsumerFactory:
    """Builds consumers of the selected implementation and closes leftovers at teardown.

    ``impl`` tells tests which implementation they drive, so checks of our extras
    (``state``, ``member_epoch``) run exactly when it is ours.
    """

    def __init__(self, bootstrap: str, impl: str) -> None:
        self.bootstrap = bootstrap
        self.impl = impl
        self._made: list[Any] = []

    @property
    def is_ours(self) -> bool:
        return self.impl == OURS

    def __call__(self, config: Mapping[str, Any], *, impl: str | None = None) -> Any:
        """A new consumer; ``bootstrap.servers`` defaults to the cluster under test.

        ``impl`` forces an implementation (interop tests mix them); it defaults to the
        selected one.
        """
        consumer = build_consumer(
            {"bootstrap.servers": self.bootstrap, **config}, impl or self.impl
        )
        self._made.append(consumer)
        return consumer

    def config_for_child(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, **config}

    def close_all(self) -> None:
        for consumer in self._made:
            safe_close(consumer)


@pytest.fixture(name="make_consumer")
def make_consumer_fixture(kafka_bootstrap: str) -> Iterator[ConsumerFactory]:
    """Factory fixture: ``make_consumer({"group.id": ...})`` -> consumer; all closed at the end."""
    factory = ConsumerFactory(kafka_bootstrap, selected_impl())
    try:
        yield factory
    finally:
        factory.close_all()


def check_extras(factory: ConsumerFactory, consumer: Any, *, state: str | None = None) -> None:
    """For our implementation only: ``state`` has the expected name, ``member_epoch`` is an int.

    In confluent mode it does nothing (librdkafka has no such attributes); in the default mode
    it always runs.
    """
    if not factory.is_ours:
        return
    assert isinstance(consumer.member_epoch, int), "member_epoch must be an int"
    if state is not None:
        # The broker counts an assignment as the member's own when it sends it; the member is
        # STABLE only after OffsetFetch, on_assign and its ack. Wait for that, bounded.
        wait_until(
            lambda: consumer.state == state,
            CONVERGENCE_S,
            f"state {state}",
            details=lambda: f"state is {consumer.state!r}, expected {state!r}",
        )


# --------------------------------------------------------------------------------------------
# Waiting
# --------------------------------------------------------------------------------------------


def wait_until(
    predicate: Callable[[], object],
    timeout_s: float,
    description: str,
    *,
    interval_s: float = 0.05,
    details: Callable[[], str] | None = None,
) -> None:
    """Poll ``predicate`` until it is truthy; fail with ``description`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(
                f"timed out after {timeout_s:.0f}s waiting for {description}{extra}"
            )
        time.sleep(interval_s)


def holds_for(
    predicate: Callable[[], object],
    duration_s: float,
    description: str,
    *,
    interval_s: float = 0.1,
    details: Callable[[], str] | None = None,
) -> None:
    """Assert that ``predicate`` stays truthy for the whole of ``duration_s`` (checked often)."""
    start = time.monotonic()
    while True:
        if not predicate():
            extra = f"\n{details()}" if details is not None else ""
            elapsed = time.monotonic() - start
            raise AssertionError(f"{description} stopped holding after {elapsed:.1f}s{extra}")
        if time.monotonic() - start >= duration_s:
            return
        time.sleep(interval_s)


# --------------------------------------------------------------------------------------------
# Callback timeline
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallbackEvent:
    """One rebalance callback (or a kill) of one member, stamped with ``time.monotonic()``."""

    at: float
    member: str
    kind: CallbackKind
    partitions: tuple[Partition, ...]
    thread: str = ""


@dataclass(frozen=True)
class Ownership:
    """``member`` owned ``partition`` from ``start`` until ``end`` (``inf``: still owns it)."""

    member: str
    partition: Partition
    start: float
    end: float
    ended_by: CallbackKind | None = None


def as_partitions(partitions: Iterable[TopicPartition]) -> tuple[Partition, ...]:
    return tuple(sorted((tp.topic, tp.partition) for tp in partitions))


class Timeline:
    """Thread-safe record of every member's rebalance callbacks.

    Assign is stamped when its callback starts (the member may use the partition from then
    on); revoke and lost are stamped when their callback returns (the member stops using the
    partition then). A killed member's ownership ends at its ``killed`` event.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[CallbackEvent] = []

    # recording ------------------------------------------------------------------------------

    def record(
        self, member: str, kind: CallbackKind, partitions: Iterable[Partition], at: float
    ) -> None:
        thread = threading.current_thread().name
        with self._lock:
            self._events.append(CallbackEvent(at, member, kind, tuple(sorted(partitions)), thread))

    def callbacks(
        self,
        member: str,
        on_revoke_extra: Callable[[Any, list[TopicPartition]], None] | None = None,
    ) -> dict[str, Callable[[Any, list[TopicPartition]], None]]:
        """``on_assign``/``on_revoke``/``on_lost`` keyword arguments for ``subscribe()``.

        ``on_revoke_extra`` runs inside ``on_revoke`` before the revoke is stamped (e.g. a
        commit of the revoked partitions).
        """

        def on_assign(_consumer: Any, partitions: list[TopicPartition]) -> None:
            self.record(member, "assign", as_partitions(partitions), time.monotonic())

        def on_revoke(consumer: Any, partitions: list[TopicPartition]) -> None:
            if on_revoke_extra is not None:
                on_revoke_extra(consumer, partitions)
            self.record(member, "revoke", as_partitions(partitions), time.monotonic())

        def on_lost(_consumer: Any, partitions: list[TopicPartition]) -> None:
            self.record(member, "lost", as_partitions(partitions), time.monotonic())

        return {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def mark_killed(self, member: str, at: float) -> None:
        self.record(member, "killed", (), at)

    def merge_child_events(self, member: str, path: Path) -> None:
        """Add the events a child process wrote as JSON lines (see ``member_child.py``)."""
        if not path.exists():
            return
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by SIGKILL
                continue
            parts = [(str(t), int(p)) for t, p in entry["partitions"]]
            self.record(member, entry["kind"], parts, float(entry["at"]))

    # reading --------------------------------------------------------------------------------

    def events(self, member: str | None = None) -> list[CallbackEvent]:
        with self._lock:
            chosen = [e for e in self._events if member is None or e.member == member]
        return sorted(chosen, key=lambda e: e.at)

    def owned(self, member: str) -> set[Partition]:
        """What ``member`` owns now according to its callbacks."""
        owned: set[Partition] = set()
        for event in self.events(member):
            if event.kind == "assign":
                owned |= set(event.partitions)
            elif event.kind in ("revoke", "lost"):
                owned -= set(event.partitions)
            elif event.kind == "killed":
                owned.clear()
        return owned

    def assignment(self, members: Iterable[str]) -> dict[str, set[Partition]]:
        return {member: self.owned(member) for member in members}

    def ownerships(self) -> list[Ownership]:
        """Every ownership interval of every member, from the callbacks."""
        intervals: list[Ownership] = []
        open_since: dict[tuple[str, Partition], float] = {}
        for event in self.events():
            if event.kind == "assign":
                for part in event.partitions:
                    open_since.setdefault((event.member, part), event.at)
                continue
            if event.kind == "killed":
                ended = [key for key in open_since if key[0] == event.member]
            else:
                ended = [(event.member, part) for part in event.partitions]
            for key in ended:
                start = open_since.pop(key, None)
                if start is not None:
                    intervals.append(Ownership(key[0], key[1], start, event.at, event.kind))
        for (member, part), start in open_since.items():
            intervals.append(Ownership(member, part, start, float("inf")))
        return intervals

    def anomalies(self) -> list[str]:
        """Assigns of already owned partitions and revokes/losses of partitions not owned."""
        problems: list[str] = []
        owned: dict[str, set[Partition]] = {}
        for event in self.events():
            mine = owned.setdefault(event.member, set())
            parts = set(event.partitions)
            if event.kind == "assign":
                if parts & mine:
                    problems.append(f"{event.member} assigned already owned {sorted(parts & mine)}")
                mine |= parts
            elif event.kind in ("revoke", "lost"):
                if parts - mine:
                    problems.append(f"{event.member} {event.kind} not owned {sorted(parts - mine)}")
                mine -= parts
            else:
                mine.clear()
        return problems

    def overlaps(self, *, except_lost: bool = False) -> list[str]:
        """Pairs of intervals in which two members owned the same partition at once.

        ``except_lost`` leaves out intervals ended by ``on_lost``: a lost partition was taken
        away before its owner was told, which is what "lost" means.
        """
        by_partition: dict[Partition, list[Ownership]] = {}
        for interval in self.ownerships():
            if except_lost and interval.ended_by == "lost":
                continue
            by_partition.setdefault(interval.partition, []).append(interval)
        problems: list[str] = []
        for part, intervals in sorted(by_partition.items()):
            intervals.sort(key=lambda i: i.start)
            for before, after in zip(intervals, intervals[1:], strict=False):
                if after.start < before.end:
                    problems.append(
                        f"{part}: {after.member} assigned at {after.start:.3f} while "
                        f"{before.member} owned it until {before.end:.3f}"
                    )
        return problems

    def count(self, member: str, kinds: Sequence[CallbackKind], since: float = 0.0) -> int:
        return sum(1 for e in self.events(member) if e.kind in kinds and e.at >= since)

    def dump(self) -> str:
        start = min((e.at for e in self.events()), default=0.0)
        return "\n".join(
            f"  +{e.at - start:8.3f}s {e.member:>10} {e.kind:<7} {list(e.partitions)}"
            for e in self.events()
        )

    def assert_revoke_before_assign(self, *, except_lost: bool = False) -> None:
        """Every partition left its old owner before reaching its new one; no odd callbacks."""
        problems = self.anomalies() + self.overlaps(except_lost=except_lost)
        assert not problems, "ownership violations:\n" + "\n".join(problems) + "\n" + self.dump()


def is_balanced_cover(assignment: Mapping[str, set[Partition]], partitions: set[Partition]) -> bool:
    """Disjoint, covering ``partitions`` exactly, and sizes differing by at most one."""
    sizes = [len(parts) for parts in assignment.values()]
    union: set[Partition] = set().union(*assignment.values()) if assignment else set()
    disjoint = sum(sizes) == len(union)
    return disjoint and union == partitions and bool(sizes) and max(sizes) - min(sizes) <= 1


def all_partitions(topic: str, count: int) -> set[Partition]:
    return {(topic, p) for p in range(count)}


def wait_for_balanced(
    timeline: Timeline,
    members: Sequence[str],
    partitions: set[Partition],
    timeout_s: float = CONVERGENCE_S,
) -> dict[str, set[Partition]]:
    """Wait until ``members`` own ``partitions`` between them, balanced; return the assignment."""
    wait_until(
        lambda: is_balanced_cover(timeline.assignment(members), partitions),
        timeout_s,
        f"a balanced assignment of {len(partitions)} partitions over {list(members)}",
        details=lambda: f"owned: {timeline.assignment(members)}\n{timeline.dump()}",
    )
    return timeline.assignment(members)


# --------------------------------------------------------------------------------------------
# In-process member on its own thread
# --------------------------------------------------------------------------------------------

MessageHandler = Callable[["MemberThread", list[Message]], None]


class MemberThread:
    """One member polling on its own thread: subscribe, ``poll(0.1)`` until stopped, close.

    Callbacks therefore run on this thread, as the API promises. Records go to ``on_messages``
    (default: :meth:`record_consumed`); error events returned by ``poll()`` are kept in
    ``errors``; an exception raised by the consumer stops the thread and is re-raised by
    :meth:`stop`. ``batch_size > 1`` uses ``consume(batch_size, 0.1)`` instead of ``poll``.
    """

    def __init__(
        self,
        name: str,
        consumer: Any,
        topics: list[str],
        timeline: Timeline,
        *,
        on_messages: MessageHandler | None = None,
        on_revoke_extra: Callable[[Any, list[TopicPartition]], None] | None = None,
        batch_size: int = 1,
    ) -> None:
        self.name = name
        self.consumer = consumer
        self.topics = topics
        self.timeline = timeline
        self.on_messages = on_messages or MemberThread.record_consumed
        self.on_revoke_extra = on_revoke_extra
        self.batch_size = batch_size
        self.errors: list[KafkaError] = []
        self.consumed: list[tuple[int, int, bytes | None]] = []  # (partition, offset, value)
        self.polls = 0
        self.closed = threading.Event()
        self.pause_polling = threading.Event()
        self._stop = threading.Event()
        self._close_on_stop = True
        self._failure: BaseException | None = None
        self._subscribed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> MemberThread:
        self._thread.start()
        wait_until(
            lambda: self._subscribed.is_set() or self._failure is not None,
            30,
            f"{self.name} to subscribe",
        )
        self._raise_failure()
        return self

    @staticmethod
    def record_consumed(member: MemberThread, messages: list[Message]) -> None:
        for message in messages:
            member.consumed.append((message.partition(), message.offset(), message.value()))

    def _run(self) -> None:
        try:
            self.consumer.subscribe(
                self.topics, **self.timeline.callbacks(self.name, self.on_revoke_extra)
            )
            self._subscribed.set()
            while not self._stop.is_set():
                if self.pause_polling.is_set():
                    self._stop.wait(0.05)
                    continue
                self._poll_once()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread by stop()
            self._failure = exc
        finally:
            self._subscribed.set()
            if self._close_on_stop:
                try:
                    self.consumer.close()
                except BaseException as exc:  # noqa: BLE001
                    self._failure = self._failure or exc
            self.closed.set()

    def _poll_once(self) -> None:
        if self.batch_size > 1:
            messages = self.consumer.consume(self.batch_size, 0.1)
        else:
            message = self.consumer.poll(0.1)
            messages = [] if message is None else [message]
        self.polls += 1
        records = []
        for message in messages:
            if message.error() is not None:
                self.errors.append(message.error())
            else:
                records.append(message)
        if records:
            self.on_messages(self, records)

    def stop(self, *, close: bool = True, timeout_s: float = 30.0) -> None:
        """Stop polling; ``close()`` on the member's thread unless ``close=False``."""
        self._close_on_stop = close
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.name} did not stop within {timeout_s}s"
        self._raise_failure()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise AssertionError(f"member {self.name} failed: {failure!r}") from failure


@dataclass
class Group:
    """The in-process members of one test, stopped (and closed) together."""

    timeline: Timeline = field(default_factory=Timeline)
    members: dict[str, MemberThread] = field(default_factory=dict)

    def add(self, member: MemberThread) -> MemberThread:
        self.members[member.name] = member
        member.start()
        return member

    def live(self) -> list[str]:
        return [name for name, m in self.members.items() if not m.closed.is_set()]

    def assert_callbacks_on_poll_threads(self) -> None:
        """Every callback of an in-process member ran on the thread that polls it."""
        wrong = [
            f"{e.member} {e.kind} on thread {e.thread!r}"
            for e in self.timeline.events()
            if e.member in self.members and e.thread != f"member-{e.member}"
        ]
        assert not wrong, "callbacks off the polling thread: " + "; ".join(wrong)

    def stop_all(self) -> None:
        failures: list[str] = []
        for member in self.members.values():
            try:  # also reports a member whose thread already ended with a failure
                member.stop()
            except AssertionError as exc:
                failures.append(str(exc))
        assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def make_producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "acks": "all",
            "enable.idempotence": True,
        }
    )


def produce_numbered(
    producer: Producer, topic: str, start: int, count: int, partitions: int, *, flush: bool = True
) -> range:
    """Produce values ``str(n)`` for n in ``[start, start+count)``, round-robin over partitions."""
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    for n in range(start, start + count):
        while True:
            try:
                producer.produce(
                    topic, str(n).encode(), partition=n % partitions, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.05)
        if n % 1000 == 0:
            producer.poll(0)
    if flush:
        remaining = producer.flush(60)
        assert remaining == 0, f"{remaining} records not delivered within 60s"
        assert not failures, f"delivery failures: {failures[:5]}"
    return range(start, start + count)


def values_of(consumed: Iterable[tuple[int, int, bytes | None]]) -> set[int]:
    return {int(value) for _p, _o, value in consumed if value is not None}


def duplicates(consumed: Iterable[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """``(partition, offset)`` pairs consumed more than once, with their counts."""
    counts = Counter(consumed)
    return {key: n for key, n in counts.items() if n > 1}


# --------------------------------------------------------------------------------------------
# Child-process member (SIGKILL tests)
# --------------------------------------------------------------------------------------------


class ChildMember:
    """A member running ``member_child.py`` in its own process, killable with SIGKILL.

    The child writes its callbacks (``events``), each consumed ``partition offset`` (``consumed``)
    and each successful commit ``partition offset`` (``commits``) to line-buffered files.
    """

    def __init__(
        self,
        name: str,
        workdir: Path,
        config: Mapping[str, Any],
        topics: list[str],
        *,
        commit_mode: Literal["none", "manual"] = "none",
        batch_delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self.events = workdir / f"{name}.events.jsonl"
        self.consumed = workdir / f"{name}.consumed.txt"
        self.commits = workdir / f"{name}.commits.txt"
        self.stderr = workdir / f"{name}.stderr.txt"
        spec = {
            "impl": selected_impl(),
            "config": dict(config),
            "topics": topics,
            "events": str(self.events),
            "consumed": str(self.consumed),
            "commits": str(self.commits),
            "commit_mode": commit_mode,
            "batch_delay_s": batch_delay_s,
        }
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(MEMBER_CHILD_SCRIPT), json.dumps(spec)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def owned(self) -> set[Partition]:
        timeline = Timeline()
        timeline.merge_child_events(self.name, self.events)
        return timeline.owned(self.name)

    def consumed_pairs(self) -> list[tuple[int, int]]:
        return _read_pairs(self.consumed)

    def committed(self) -> dict[int, int]:
        """Last committed offset (next offset to consume) per partition."""
        last: dict[int, int] = {}
        for partition, offset in _read_pairs(self.commits):
            last[partition] = max(offset, last.get(partition, -1))
        return last

    def kill(self) -> float:
        """SIGKILL the child; return the ``time.monotonic()`` just before the signal."""
        at = time.monotonic()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        return at

    def failure_text(self) -> str:
        return self.stderr.read_text(errors="replace")[-4000:] if self.stderr.exists() else ""

    def ensure_dead(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _read_pairs(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    pairs: list[tuple[int, int]] = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 2 and all(f.lstrip("-").isdigit() for f in fields):
            pairs.append((int(fields[0]), int(fields[1])))
    return pairs


def wait_for_stable_epochs(
    factory: ConsumerFactory, consumers: Sequence[Any], timeout_s: float = CONVERGENCE_S
) -> None:
    """Ours only: every member is STABLE at one shared, positive member epoch."""
    if not factory.is_ours:
        return

    def settled() -> bool:
        epochs = {c.member_epoch for c in consumers}
        return all(c.state == "STABLE" for c in consumers) and len(epochs) == 1 and min(epochs) > 0

    wait_until(
        settled,
        timeout_s,
        "all members STABLE at the same member epoch",
        details=lambda: str([(c.state, c.member_epoch) for c in consumers]),
    )
