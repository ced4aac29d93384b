"""A harness stepping N members against a :class:`CoordinatorSim` with a :class:`ManualClock`.

Each member is wrapped in a :class:`MemberDriver` that behaves like a well-behaved application and
runtime: it finds the coordinator at once, answers metadata from the simulation, runs callbacks and
completes revocations immediately, applies assignments to an in-memory data plane, commits to the
simulation, and polls (reporting consumed offsets) every time it is pumped. Hooks delay any of that:
``hold_revocations`` keeps revocations pending until :meth:`MemberDriver.complete_revocations`,
``hold_metadata`` keeps metadata answers back, ``app_polling=False`` simulates a stuck application,
and :meth:`GroupHarness.crash` stops a member dead.

Two ways to drive:

* :meth:`GroupHarness.heartbeat` - step one member until it sends exactly one heartbeat and process
  the answer (other members do nothing meanwhile): used to replay the KIP's case studies;
* :meth:`GroupHarness.run` - let every live member run on its own schedule for a while.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from consumer.member import (
    ApplyAssignment,
    AppPolled,
    Command,
    CommitCompleted,
    CommittedOffsetsFetched,
    CoordinatorChanged,
    FetchCommittedOffsets,
    FetchMetadata,
    FindCoordinator,
    HeartbeatFailed,
    HeartbeatRequest,
    HeartbeatSucceeded,
    Input,
    InvokeOnRevoke,
    Member,
    MemberConfig,
    MemberState,
    MetadataResolved,
    ReportCommitResult,
    ReportError,
    RevocationCompleted,
    SendHeartbeat,
    ShutDown,
    StartFetching,
    StopFetching,
    Subscribed,
    TopicPartition,
)
from consumer.testing.sim.autopilot import Autopilot
from consumer.testing.sim.clock import ManualClock
from consumer.testing.sim.coordinator import CoordinatorSim, HeartbeatResponse

_MAX_STEPS = 10_000


class HarnessError(RuntimeError):
    """The harness could not do what a test asked (for example a member never heartbeats)."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One heartbeat request and the simulated coordinator's response."""

    request: HeartbeatRequest
    response: HeartbeatResponse


@dataclass(eq=False)
class MemberDriver:
    """One member plus the fake application and data plane around it."""

    name: str
    member: Member
    alive: bool = True
    app_polling: bool = True
    hold_revocations: bool = False
    hold_metadata: bool = False
    assigned: set[TopicPartition] = field(default_factory=set)
    stopped: set[TopicPartition] = field(default_factory=set)
    consumed: dict[TopicPartition, int] = field(default_factory=dict)
    start_offsets: dict[TopicPartition, int | None] = field(default_factory=dict)
    #: Assigned partitions not fetched yet, with the lookup (StartFetching) each waits for.
    awaiting_start: dict[TopicPartition, int] = field(default_factory=dict)
    outbox: deque[SendHeartbeat] = field(default_factory=deque)
    pending_revocations: list[InvokeOnRevoke] = field(default_factory=list)
    pending_metadata: list[FetchMetadata] = field(default_factory=list)
    log: list[Command] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    errors: list[ReportError] = field(default_factory=list)
    commit_results: list[ReportCommitResult] = field(default_factory=list)
    inbox: deque[Input] = field(default_factory=deque)
    next_deadline_ms: int | None = None
    shut_down: bool = False

    def complete_revocations(self) -> None:
        """Answer every held revocation (they are processed at the next pump)."""
        for command in self.pending_revocations:
            self.inbox.append(RevocationCompleted(command.request_id))
        self.pending_revocations.clear()

    @property
    def fetching(self) -> set[TopicPartition]:
        """Partitions the data plane is fetching (assigned, started and not stopped)."""
        return self.assigned - self.stopped - self.awaiting_start.keys()


class GroupHarness:
    """N members, one simulated coordinator and a manual clock.

    Args:
        sim: the coordinator simulation (a fresh one by default).
        clock: the clock (starts at 0 by default).
        seed: seed of each member's ``random.Random`` (member i uses ``seed + i``).
        immediate_heartbeats: deliver heartbeats as soon as they are sent (``run`` mode); with False
            heartbeats wait in the driver's outbox for :meth:`heartbeat`.
    """

    def __init__(
        self,
        sim: CoordinatorSim | None = None,
        clock: ManualClock | None = None,
        *,
        seed: int = 0,
        immediate_heartbeats: bool = True,
    ) -> None:
        self.sim = sim if sim is not None else CoordinatorSim()
        self.clock = clock if clock is not None else ManualClock()
        self.seed = seed
        self.immediate_heartbeats = immediate_heartbeats
        self.drivers: dict[str, MemberDriver] = {}
        self.observers: list[Callable[[GroupHarness], None]] = []
        #: Answers commands from the simulation (metadata, offsets, commits).
        self.autopilot = Autopilot(
            topic_names=self._topic_names,
            fetch_committed=self._fetch_committed,
            commit=lambda command: CommitCompleted(command.request_id, self.sim.commit(command)),
        )

    # --- members ----------------------------------------------------------------------------

    def add_member(
        self,
        name: str,
        topics: tuple[str, ...] | None = ("foo",),
        *,
        regex: str | None = None,
        config: MemberConfig | None = None,
        subscribe: bool = True,
    ) -> MemberDriver:
        """Create a member, subscribe it and let it poll once (which makes it join)."""
        if name in self.drivers:
            raise HarnessError(f"member {name} exists")
        config = config or MemberConfig(group_id=self.sim.group_id)
        rng = random.Random(self.seed + len(self.drivers))
        driver = MemberDriver(name, Member(config=config, random=rng))
        self.drivers[name] = driver
        if subscribe:
            event = Subscribed(topic_regex=regex) if regex else Subscribed(topic_names=topics)
            driver.inbox.append(event)
        self.pump(name)
        return driver

    def __getitem__(self, name: str) -> MemberDriver:
        return self.drivers[name]

    def live(self) -> list[MemberDriver]:
        """Drivers that are alive and not shut down."""
        return [d for d in self.drivers.values() if d.alive and not d.shut_down]

    def crash(self, name: str) -> None:
        """Stop a member dead: no more heartbeats, its data plane is gone."""
        driver = self.drivers[name]
        driver.alive = False
        driver.assigned.clear()
        driver.outbox.clear()

    # --- stepping ---------------------------------------------------------------------------

    def feed(self, name: str, event: Input) -> None:
        """Queue an input for a member and pump it."""
        self.drivers[name].inbox.append(event)
        self.pump(name)

    def pump(self, name: str) -> None:
        """Process a member's inputs and commands until it is quiet at the current time."""
        driver = self.drivers[name]
        if not driver.alive or driver.shut_down:
            return
        now = self.clock.now_ms
        if driver.app_polling:
            driver.inbox.append(AppPolled(self._consume(driver)))
        for _ in range(_MAX_STEPS):
            if driver.shut_down:
                return
            if driver.inbox:
                commands = driver.member.handle(driver.inbox.popleft(), now)
            else:
                commands, driver.next_deadline_ms = driver.member.poll(now)
                if not commands:
                    self._notify()
                    return
            for command in commands:
                self._execute(driver, command)
        raise HarnessError(f"member {name} did not settle")  # pragma: no cover

    def heartbeat(self, name: str) -> Exchange:
        """Run member ``name`` (only) until it sent one heartbeat, and deliver the answer."""
        driver = self.drivers[name]
        for _ in range(_MAX_STEPS):
            self.pump(name)
            if driver.outbox:
                break
            if driver.next_deadline_ms is None:
                raise HarnessError(f"member {name} has nothing scheduled")
            self.clock.advance_to(driver.next_deadline_ms)
        else:  # pragma: no cover
            raise HarnessError(f"member {name} never heartbeats")
        exchange = self._deliver(driver, driver.outbox.popleft())
        self.pump(name)
        return exchange

    def run(self, duration_ms: int) -> None:
        """Let every live member run on its own schedule for ``duration_ms``."""
        end_ms = self.clock.now_ms + duration_ms
        for _ in range(_MAX_STEPS * 10):
            for driver in self.live():
                self.pump(driver.name)
                while driver.outbox:
                    self._deliver(driver, driver.outbox.popleft())
                    self.pump(driver.name)
            self.sim.expire(self.clock.now_ms)
            times = [d.next_deadline_ms for d in self.live() if d.next_deadline_ms is not None]
            expiry = self.sim.next_expiry_ms()
            if expiry is not None:
                times.append(expiry)
            upcoming = min(times) if times else end_ms
            if self.clock.now_ms >= end_ms:
                return
            self.clock.advance_to(min(max(upcoming, self.clock.now_ms + 1), end_ms))
        raise HarnessError("run did not finish")  # pragma: no cover

    def run_until(self, predicate: Callable[[], bool], max_ms: int, step_ms: int = 100) -> int:
        """Run in steps of ``step_ms`` until ``predicate()``; returns the elapsed time."""
        start_ms = self.clock.now_ms
        while not predicate():
            if self.clock.now_ms - start_ms >= max_ms:
                raise HarnessError(f"condition not reached within {max_ms} ms")
            self.run(step_ms)
        return self.clock.now_ms - start_ms

    def all_stable(self) -> bool:
        """Every live member is STABLE at the target epoch and owns exactly its target."""
        for driver in self.live():
            member = driver.member
            if member.state is not MemberState.STABLE or member.member_id not in self.sim.members:
                return False
            if self.sim.target_epoch != self.sim.group_epoch:
                return False
            if self.sim.members[member.member_id].epoch != self.sim.target_epoch:
                return False
            target = set(self.sim.target_assignment(member.member_id))
            if driver.assigned != target or set(member.owned_partitions) != target:
                return False
        return True

    def _notify(self) -> None:
        for observer in self.observers:
            observer(self)

    # --- the fake runtime and application ---------------------------------------------------

    def _consume(self, driver: MemberDriver) -> dict[TopicPartition, int]:
        for tp in driver.fetching:
            start = driver.start_offsets.get(tp) or 0
            driver.consumed[tp] = max(driver.consumed.get(tp, start), start) + 1
        return {tp: driver.consumed[tp] for tp in driver.fetching}

    def _deliver(self, driver: MemberDriver, command: SendHeartbeat) -> Exchange:
        response = self.sim.heartbeat(command.request, self.clock.now_ms)
        exchange = Exchange(command.request, response)
        driver.exchanges.append(exchange)
        event: Input
        if response.error_code:
            event = HeartbeatFailed(command.request_id, response.error_code, response.error_message)
        else:
            event = HeartbeatSucceeded(
                command.request_id,
                response.member_epoch,
                response.heartbeat_interval_ms,
                response.assignment,
                response.member_id,
            )
        driver.inbox.append(event)
        return exchange

    def _execute(self, driver: MemberDriver, command: Command) -> None:
        driver.log.append(command)
        match command:
            case SendHeartbeat():
                if command.is_leave or self.immediate_heartbeats:
                    self._deliver(driver, command)
                else:
                    driver.outbox.append(command)
                return
            case FindCoordinator():
                driver.inbox.append(CoordinatorChanged(coordinator_id=1))
                return
            case FetchMetadata() if driver.hold_metadata:
                driver.pending_metadata.append(command)
                return
            case InvokeOnRevoke() if driver.hold_revocations:
                driver.pending_revocations.append(command)
                return
            case StopFetching():
                driver.stopped |= set(command.partitions)
            case ApplyAssignment():
                self._apply(driver, command)
            case StartFetching():
                self._start(driver, command)
            case ReportError():
                driver.errors.append(command)
            case ReportCommitResult():
                driver.commit_results.append(command)
            case ShutDown():
                driver.shut_down = True
        answer = self.autopilot.answer(command)
        if answer is not None:
            driver.inbox.append(answer)

    def _topic_names(self, command: FetchMetadata) -> dict[uuid.UUID, str]:
        known = self.sim.topic_names()
        return {tid: known[tid] for tid in command.topic_ids if tid in known}

    def _fetch_committed(self, command: FetchCommittedOffsets) -> CommittedOffsetsFetched:
        offsets, code = self.sim.fetch(command)
        return CommittedOffsetsFetched(command.request_id, offsets, code)

    def _apply(self, driver: MemberDriver, command: ApplyAssignment) -> None:
        driver.assigned = set(command.assigned)
        driver.stopped &= driver.assigned
        driver.stopped -= set(command.added)
        for tp in command.removed:
            driver.consumed.pop(tp, None)
            driver.awaiting_start.pop(tp, None)
        for tp in command.added:
            driver.start_offsets[tp] = None
            driver.consumed.pop(tp, None)
            driver.awaiting_start.pop(tp, None)
        if command.start_request_id is not None:
            for tp in command.awaiting_start:
                driver.awaiting_start[tp] = command.start_request_id

    def _start(self, driver: MemberDriver, command: StartFetching) -> None:
        """As the application thread: the partitions still assigned and waiting for this
        lookup start at the offset found, else wait for the follow-up lookup, else start at
        the beginning (the fake data plane's logical offset)."""
        for tp, waits_for in list(driver.awaiting_start.items()):
            if waits_for != command.request_id:
                continue
            del driver.awaiting_start[tp]
            if tp not in driver.assigned:
                continue
            offset = command.offsets.get(tp)
            if offset is None and command.then_request_id is not None:
                driver.awaiting_start[tp] = command.then_request_id
            else:
                driver.start_offsets[tp] = offset


def release_metadata(driver: MemberDriver, harness: GroupHarness) -> None:
    """Answer a driver's held metadata requests from the simulation now."""
    for command in driver.pending_metadata:
        driver.inbox.append(MetadataResolved(harness._topic_names(command)))
    driver.pending_metadata.clear()
    harness.pump(driver.name)


__all__ = [
    "Exchange",
    "GroupHarness",
    "HarnessError",
    "MemberDriver",
    "release_metadata",
]
