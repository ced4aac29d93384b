"""Helpers of the ``ShareConsumer`` real-broker tests (ours and confluent-kafka's).

* set-up: :func:`share_group` (a group id with its group configs set before it first reads),
  :func:`share_config`, :func:`produce` (records whose value is ``v<number>``) and the
  ``share_consumers`` factory fixture (import ``share_consumers_fixture`` into the test module);
* consuming: :func:`poll_until` (one consumer, bounded) and :class:`PollingMember` (a consumer
  polling on its own thread in implicit mode, recording every :class:`Delivery`);
* checking: :func:`exactly_once_problems` and :func:`nothing_left` (a fresh member finds nothing);
* a member in its own process: :class:`ShareChild` (runs ``share_member_child.py``);
* observing the group: :func:`broker_config` (DescribeConfigs) and :func:`describe_share_group`
  (ShareGroupDescribe v1 through the wire layer's codec).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Message, Producer, TopicPartition
from confluent_kafka import ShareConsumer as ConfluentShareConsumer
from confluent_kafka.admin import AdminClient, ConfigResource
from share_wire_support import JOIN_BOUND_S as DESCRIBE_BOUND_S
from share_wire_support import RETRY_BACKOFF_S, set_share_group_configs

from consumer import ShareConsumer
from consumer._runtime.cluster import ClusterClient
from consumer._wire.share_group_describe import (
    DescribedShareGroup,
    build_share_group_describe_request,
    parse_share_group_describe_response,
)
from consumer.errors import CoordinatorError
from tests.support import OURS

#: The group's lock duration unless a test sets its own: longer than any test, so a record seen
#: again was released (or its holder died and a shorter lock was set on purpose).
LOCK_DURATION_MS = 60_000


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    start: int = 0,
    partitions: int = 1,
    batch_records: int | None = None,
) -> None:
    """Produce values ``v<start>`` .. ``v<start+count-1>``, record ``n`` to partition
    ``n % partitions``; ``batch_records`` caps the records per producer batch."""
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if batch_records is not None:
        settings["batch.num.messages"] = batch_records
    producer = Producer(settings)
    for index in range(start, start + count):
        producer.produce(topic, value=f"v{index}".encode(), partition=index % partitions)
    assert producer.flush(30) == 0


def number_of(message: Message) -> int:
    """The number ``n`` of a record produced by :func:`produce` (value ``v<n>``)."""
    value = message.value()
    assert isinstance(value, bytes), value
    assert value.startswith(b"v"), value
    return int(value[1:])


def share_group(admin: AdminClient, unique_name: Callable[[str], str], **configs: str) -> str:
    """A new share group id reading from the earliest offset, with a 60 s lock unless
    ``configs`` say otherwise (``share_record_lock_duration_ms="3000"``)."""
    group_id = unique_name("share")
    settings = {
        "share_auto_offset_reset": "earliest",
        "share_record_lock_duration_ms": str(LOCK_DURATION_MS),
        **configs,
    }
    set_share_group_configs(admin, group_id, **settings)
    return group_id


def share_config(bootstrap: str, group_id: str, **extra: object) -> dict[str, object]:
    """A share consumer's config dict (``extra`` keys with ``_`` are not rewritten)."""
    return {"bootstrap.servers": bootstrap, "group.id": group_id, **extra}


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
        assert time.monotonic() < deadline, f"only {len(got)} records: {got}"
        got.extend(consumer.poll(0.5))
    return got


def safe_close(consumer: Any) -> None:
    """Close ours or confluent's (a second close of confluent's raises)."""
    with contextlib.suppress(RuntimeError):
        consumer.close()


class ShareConsumers:
    """Builds share consumers (ours or confluent's) and closes the leftovers at teardown."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._made: list[Any] = []

    def __call__(
        self, group_id: str, impl: str = OURS, config: Mapping[str, object] | None = None
    ) -> Any:
        conf = share_config(self.bootstrap, group_id, **(config or {}))
        made = ShareConsumer(conf) if impl == OURS else ConfluentShareConsumer(conf)
        self._made.append(made)
        return made

    def close_all(self) -> None:
        for made in self._made:
            safe_close(made)


@pytest.fixture(name="share_consumers")
def share_consumers_fixture(kafka_bootstrap: str) -> Iterator[ShareConsumers]:
    """``share_consumers(group_id, impl="ours", config=None)`` -> a consumer (``config`` adds
    keys to ``bootstrap.servers`` and ``group.id``), closed at the end."""
    factory = ShareConsumers(kafka_bootstrap)
    try:
        yield factory
    finally:
        factory.close_all()


@dataclass(frozen=True)
class Delivery:
    """One record as a member received it."""

    member: str
    partition: int
    offset: int
    number: int
    delivery_count: int | None
    at_mono: float


@dataclass
class PollingMember:
    """A share consumer polling on its own thread (implicit mode: each poll ACCEPTs the last).

    ``stop()`` ends the loop and closes the consumer on that thread (ACCEPTing the last poll).
    """

    name: str
    consumer: Any
    topics: Sequence[str]
    deliveries: list[Delivery] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> PollingMember:
        self.consumer.subscribe(list(self.topics))
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for message in self.consumer.poll(0.2):
                    if message.error() is not None:
                        self.errors.append(str(message.error()))
                        continue
                    delivery = Delivery(
                        self.name,
                        message.partition(),
                        message.offset(),
                        number_of(message),
                        message.delivery_count(),
                        time.monotonic(),
                    )
                    with self._lock:
                        self.deliveries.append(delivery)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            safe_close(self.consumer)

    def received(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def stop(self, timeout_s: float = 40.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            assert not self._thread.is_alive(), f"{self.name} did not stop"


def exactly_once_problems(deliveries: Sequence[Delivery], total: int) -> list[str]:
    """What is wrong with ``deliveries`` of records ``v0..v<total-1>``: lost, twice, redelivered."""
    times = Counter(d.number for d in deliveries)
    problems = []
    lost = sorted(set(range(total)) - set(times))
    if lost:
        problems.append(f"{len(lost)} lost, e.g. {lost[:10]}")
    twice = sorted(n for n, seen in times.items() if seen > 1)
    if twice:
        problems.append(f"{len(twice)} delivered more than once, e.g. {twice[:10]}")
    redelivered = [d for d in deliveries if d.delivery_count != 1]
    if redelivered:
        problems.append(f"{len(redelivered)} with delivery count != 1, e.g. {redelivered[:5]}")
    unknown = sorted(set(times) - set(range(total)))
    if unknown:
        problems.append(f"records never produced: {unknown[:10]}")
    return problems


def nothing_left(consumer: Any, topics: Sequence[str], window_s: float = 3.0) -> list[Message]:
    """What a fresh member of the group gets within ``window_s`` (empty when all is done)."""
    consumer.subscribe(list(topics))
    leftover: list[Message] = []
    end = time.monotonic() + window_s
    while time.monotonic() < end:
        leftover.extend(consumer.poll(0.5))
    return leftover


def broker_config(admin: AdminClient, name: str) -> str:
    """The value of broker config ``name`` on the (single) broker of the cluster under test."""
    node_id = next(iter(admin.list_topics(timeout=30).brokers))
    resource = ConfigResource("BROKER", str(node_id))
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return str(configs[name].value)


@dataclass(frozen=True)
class ShareGroupMember:
    """One member as ShareGroupDescribe shows it."""

    member_id: str
    member_epoch: int
    partitions: frozenset[tuple[str, int]]


def describe_share_group(bootstrap: str, group_id: str) -> dict[str, ShareGroupMember]:
    """The group's members by id (ShareGroupDescribe v1 to the coordinator), retrying while
    the coordinator loads or moves (as a fresh broker's does)."""

    async def describe() -> DescribedShareGroup | None:
        async with ClusterClient(bootstrap) as cluster:
            request = build_share_group_describe_request(1, [group_id])
            deadline = time.monotonic() + DESCRIBE_BOUND_S
            while True:
                response = await cluster.coordinator_request(group_id, request)
                (group,) = parse_share_group_describe_response(response)
                error = group.error
                if not isinstance(error, CoordinatorError) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(RETRY_BACKOFF_S)
                await cluster.find_coordinator(group_id, refresh=True)
            if error is not None and error.name == "GROUP_ID_NOT_FOUND":
                return None  # no member has joined yet
            assert error is None, error
            return group

    group = asyncio.run(describe())
    if group is None:
        return {}
    return {
        member.member_id: ShareGroupMember(
            member.member_id,
            member.member_epoch,
            frozenset(
                (member.topic_names_by_id[topic_id], partition)
                for topic_id, partitions in member.assignment.items()
                for partition in partitions
            ),
        )
        for member in group.members
    }


REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD_SCRIPT = Path(__file__).with_name("share_member_child.py")


class ShareChild:
    """Our ShareConsumer in a child process (see ``share_member_child.py``): killable,
    stoppable, and read back through the JSON lines it writes."""

    def __init__(self, name: str, workdir: Path, spec: Mapping[str, Any]) -> None:
        self.name = name
        self.events_path = workdir / f"{name}.jsonl"
        self.stderr_path = workdir / f"{name}.stderr.txt"
        python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        full_spec = {**spec, "file": str(self.events_path)}
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD_SCRIPT), json.dumps(full_spec)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path},
            )

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every complete line so far (of ``kind``)."""
        if not self.events_path.exists():
            return []
        text = self.events_path.read_text(encoding="utf-8")
        lines = [json.loads(raw) for raw in text.splitlines(keepends=True) if raw.endswith("\n")]
        return [line for line in lines if kind is None or line["kind"] == kind]

    def member_id(self) -> str | None:
        found = self.events("member_id")
        return str(found[0]["id"]) if found else None

    def records(self) -> list[tuple[float, list[Any]]]:
        """(mono, [partition, offset, value, delivery count]) of every record received."""
        return [(line["mono"], r) for line in self.events("records") for r in line["records"]]

    def signal(self, signum: signal.Signals) -> float:
        """Send ``signum``; return ``time.monotonic()`` just before."""
        at = time.monotonic()
        os.kill(self.process.pid, signum)
        return at

    def alive(self) -> bool:
        return self.process.poll() is None

    def details(self) -> str:
        err = (
            self.stderr_path.read_text(errors="replace")[-3000:]
            if self.stderr_path.exists()
            else ""
        )
        return f"{self.name}: {self.events()[-20:]}\nstderr: {err}"

    def end(self) -> None:
        """SIGCONT then SIGKILL if still running (teardown)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
        self.process.wait(timeout=10)


class ShareChildren:
    """The child processes of a test (and the keepers they forked), all ended at teardown."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._children: list[ShareChild] = []
        self._keepers: list[int] = []

    def start(self, name: str, spec: Mapping[str, Any]) -> ShareChild:
        child = ShareChild(name, self.workdir, spec)
        self._children.append(child)
        return child

    def adopt(self, pid: int) -> None:
        """End process ``pid`` (forked by a child, not ours to wait for) at teardown."""
        self._keepers.append(pid)

    def end_all(self) -> None:
        for child in self._children:
            child.end()
        for pid in self._keepers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(name="share_children")
def share_children_fixture(tmp_path: Path) -> Iterator[ShareChildren]:
    """``share_children.start(name, spec)`` -> a :class:`ShareChild`, ended at teardown."""
    children = ShareChildren(tmp_path)
    try:
        yield children
    finally:
        children.end_all()
