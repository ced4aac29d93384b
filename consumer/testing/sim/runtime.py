"""The simulated background runtime of one :class:`~consumer.testing.sim.FakeConsumer`.

It does what :class:`consumer._runtime.background.BackgroundRuntime` does, in the test's thread
and on the simulated clock: drain the application's events into the member, run the member's
timers, send its requests to the simulated cluster (whose answers come back as inputs, after the
commands of the same batch were executed, as they would from the network), and queue everything
meant for the application thread (callbacks, assignment changes, errors, commit results) for the
consumer's ``poll()``.

Faults are per runtime: a network cut (requests fail as a dead connection fails them), injected
commit errors, a crash (the runtime stops dead), and a coordinator that moved (requests to the old
one get NOT_COORDINATOR).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from consumer._bridge.member_events import MemberEventSwitch, TransitionReporter
from consumer._bridge.messages import AppEvent, RuntimeFailed, StateChanged, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer.member import Command as MemberCommand
from consumer.member import (
    CommitCompleted,
    CommitOffsets,
    CommittedOffsetsFetched,
    CoordinatorChanged,
    CoordinatorLost,
    ErrorCode,
    FetchCommittedOffsets,
    FetchMetadata,
    FindCoordinator,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    Input,
    ListStartOffsets,
    Member,
    MemberConfig,
    MemberState,
    MetadataResolved,
    ReportCommitResult,
    ResetPolicy,
    SendHeartbeat,
    ShutDown,
    StartOffsetsListed,
    TopicPartition,
)
from consumer.member.effects import MemberRule
from consumer.member.metrics import MemberMetrics
from consumer.testing.sim.coordinator import CoordinatorSim

#: Where ``policy`` starts a partition now (None: the partition is unknown).
StartOffsetOf = Callable[[TopicPartition, ResetPolicy], int | None]

__all__ = ["SimFaults", "SimRuntime"]

#: Bound on member steps at one instant (a member that never settles is a bug worth seeing).
_MAX_STEPS = 10_000
#: A network error code the member retries (what the real runtime reports for a lost request).
NETWORK_EXCEPTION = 13


@dataclass
class SimFaults:
    """Faults injected into one runtime's traffic."""

    #: Requests fail until this time (a cut network); None: the network is fine.
    cut_until_ms: int | None = None
    #: Error codes the next commits fail with, one per commit request.
    commit_errors: deque[int] = field(default_factory=deque)
    #: The next heartbeat with a positive epoch is answered FENCED_MEMBER_EPOCH.
    fenced: bool = False

    def cut(self, now_ms: int) -> bool:
        """True while the network is cut at ``now_ms``."""
        return self.cut_until_ms is not None and now_ms < self.cut_until_ms


class SimRuntime:
    """One member and its simulated background loop (see the module docstring).

    Args:
        name: the member's name in timelines.
        member_config: the member's settings (from the consumer configuration).
        seed: seed of the member's own random source (member id, backoff jitter).
        coordinator: the cluster's simulated coordinator.
        coordinator_id: the current coordinator's broker id (read on every request).
        now_ms: the cluster clock.
        to_background: the consumer's queue of application events.
        to_application: the consumer's queue of work for its ``poll()``.
        on_state: told ``(name, previous, current, now_ms)`` on every state change.
        on_committed: told ``(name, offsets, now_ms)`` for every commit the coordinator accepted.
        member_events: on while the consumer has member listeners (``add_member_listener``).
        on_epoch: told ``(name, member_epoch, now_ms)`` whenever the member epoch moves.
    """

    def __init__(
        self,
        name: str,
        member_config: MemberConfig,
        seed: int,
        coordinator: CoordinatorSim,
        coordinator_id: Callable[[], int],
        now_ms: Callable[[], int],
        to_background: ToBackground[AppEvent],
        to_application: ToApplication[ToAppEvent],
        *,
        on_state: Callable[[str, MemberState, MemberState, int], None] | None = None,
        on_committed: Callable[[str, dict[TopicPartition, int], int], None] | None = None,
        member_events: MemberEventSwitch | None = None,
        on_epoch: Callable[[str, int, int], None] | None = None,
        start_offset: StartOffsetOf | None = None,
    ) -> None:
        self.name = name
        #: Where a reset policy starts a partition (None: unknown partition, lookup fails).
        self._start_offset = start_offset
        self._coordinator = coordinator
        self._coordinator_id = coordinator_id
        self._now_ms = now_ms
        self._on_state = on_state
        self._on_committed = on_committed
        self._on_epoch = on_epoch
        self._epoch = 0
        #: The same metrics as the real runtime's, on simulated time.
        self.metrics = MemberMetrics(now_ms(), MemberState.UNSUBSCRIBED)
        self.member = Member(member_config, random.Random(seed), on_transition=self._on_transition)
        self._transitions = TransitionReporter(
            member_events if member_events is not None else MemberEventSwitch(),
            self.member.state.name,
            now_ms,
        )
        self.to_background = to_background
        self.to_application = to_application
        self.faults = SimFaults()
        self.next_deadline_ms: int | None = None
        self.stopped = False
        self.crashed = False
        self.failure: BaseException | None = None
        self.state: MemberState = self.member.state
        #: Tokens of user commits whose result was handed to the application queue.
        self.reported_tokens: set[int] = set()
        self._answers: deque[Input] = deque()
        self._known_coordinator: int | None = None

    @property
    def finished(self) -> bool:
        """True once the loop has ended (shut down, crashed or failed)."""
        return self.stopped

    @property
    def member_id(self) -> str:
        """The member id (client-generated)."""
        return self.member.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch (0 outside the group)."""
        return self.member.member_epoch

    @property
    def known_coordinator(self) -> int | None:
        """The coordinator's broker id as this member last looked it up (None: not yet)."""
        return self._known_coordinator

    def crash(self) -> None:
        """Stop dead: no more requests, nothing handed to the application any more."""
        self.crashed = True
        self.stopped = True
        self.next_deadline_ms = None

    # --- the loop -----------------------------------------------------------------------------

    def run_due(self) -> bool:
        """Do everything due at the current time; returns True if anything was done."""
        did = False
        now = self._now_ms()
        for _ in range(_MAX_STEPS):
            if self.stopped:
                return did
            events = self.to_background.drain()
            busy = bool(events) or bool(self._answers)
            try:
                for event in events:
                    if not isinstance(event, Input):  # pragma: no cover - not sent by the fake
                        continue
                    self._feed(event, now)
                while self._answers and not self.stopped:
                    self._feed(self._answers.popleft(), now)
                if self.stopped:
                    return True
                commands, self.next_deadline_ms = self.member.poll(now)
                self._execute(commands, now)
                self._publish()
            except Exception as exc:  # noqa: BLE001 - surfaced to the application, as the real loop
                self._fail(exc)
                return True
            if not busy and not commands and not self._answers:
                return did
            did = True
        raise RuntimeError(f"member {self.name} did not settle at {now} ms")  # pragma: no cover

    def _fail(self, exc: BaseException) -> None:
        self.failure = exc
        self.stopped = True
        self.next_deadline_ms = None
        self.to_application.put(RuntimeFailed(exc))

    def _feed(self, event: Input, now: int) -> None:
        self.metrics.input_received(event, now)
        self._execute(self.member.handle(event, now), now)
        self._publish()

    def _on_transition(self, _previous: MemberState, rule: MemberRule) -> None:
        """The member's observer: called for every rules-table row that fires."""
        self.metrics.state_changed(self.member.state, self._now_ms())
        self._report_transition(rule.outcome.name)

    def _report_transition(self, reason: str | None) -> None:
        member = self.member
        event = self._transitions.report(
            member.state.name, member.member_epoch, member.member_id, reason
        )
        if event is not None:
            self.to_application.put(event)

    def _publish(self) -> None:
        self._report_transition(None)  # an epoch moved outside any row (a heartbeat answer)
        epoch = self.member.member_epoch
        if epoch != self._epoch:
            self._epoch = epoch
            if self._on_epoch is not None:
                self._on_epoch(self.name, epoch, self._now_ms())
        state = self.member.state
        if state is not self.state:
            previous, self.state = self.state, state
            self.to_application.put(StateChanged(previous, state))
            if self._on_state is not None:
                self._on_state(self.name, previous, state, self._now_ms())

    # --- commands -----------------------------------------------------------------------------

    def _execute(self, commands: list[MemberCommand], now: int) -> None:
        for command in commands:
            if self.stopped:
                return
            self.metrics.command_issued(command, now)
            match command:
                case SendHeartbeat():
                    self._answers.append(self._heartbeat(command, now))
                case FindCoordinator():
                    if self.faults.cut(now):
                        self._answers.append(CoordinatorLost("network cut (simulated)"))
                    else:
                        self._known_coordinator = self._coordinator_id()
                        self._answers.append(CoordinatorChanged(self._known_coordinator))
                case FetchMetadata():
                    self._answers.append(self._metadata(command, now))
                case CommitOffsets():
                    self._answers.append(self._commit(command, now))
                case FetchCommittedOffsets():
                    self._answers.append(self._fetch(command, now))
                case ListStartOffsets():
                    self._answers.append(self._list_start_offsets(command, now))
                case ReportCommitResult():
                    self.reported_tokens.add(command.token)
                    self.to_application.put(command)
                case ShutDown():
                    self.to_application.put(command)
                    self.stopped = True
                    self.next_deadline_ms = None
                case _:
                    self.to_application.put(command)

    def _reachable(self, now: int) -> int | None:
        """The error a request to the coordinator gets now, if any (None: it gets through)."""
        if self.faults.cut(now):
            return NETWORK_EXCEPTION
        if self._known_coordinator is None:
            # As the real runtime's offset calls: the coordinator is looked up on demand (a
            # consumer that only assigns partitions commits without ever joining).
            self._known_coordinator = self._coordinator_id()
        if self._known_coordinator != self._coordinator_id():
            return ErrorCode.NOT_COORDINATOR
        return None

    def _heartbeat(self, command: SendHeartbeat, now: int) -> Input:
        problem = self._reachable(now)
        if problem == NETWORK_EXCEPTION:
            return HeartbeatTransportFailed(command.request_id, "network cut (simulated)")
        if problem is not None:
            return HeartbeatFailed(command.request_id, problem, "the coordinator moved")
        request = command.request
        if self.faults.fenced and request.member_epoch > 0:
            self.faults.fenced = False
            return HeartbeatFailed(
                command.request_id, ErrorCode.FENCED_MEMBER_EPOCH, "fenced (simulated)"
            )
        response = self._coordinator.heartbeat(request, now)
        if response.error_code:
            return HeartbeatFailed(command.request_id, response.error_code, response.error_message)
        return HeartbeatSucceeded(
            command.request_id,
            response.member_epoch,
            response.heartbeat_interval_ms,
            response.assignment,
            response.member_id,
        )

    def _metadata(self, command: FetchMetadata, now: int) -> MetadataResolved:
        if self.faults.cut(now):
            return MetadataResolved({})
        known = self._coordinator.topic_names()
        return MetadataResolved({tid: known[tid] for tid in command.topic_ids if tid in known})

    def _list_start_offsets(self, command: ListStartOffsets, now: int) -> StartOffsetsListed:
        """The fake partitions' log start or end; nothing while the network is cut (the
        member then falls back to the logical offsets, as after a failed real lookup)."""
        found: dict[TopicPartition, int] = {}
        if self._start_offset is not None and not self.faults.cut(now):
            for tp in command.partitions:
                offset = self._start_offset(tp, command.policy)
                if offset is not None:
                    found[tp] = offset
        return StartOffsetsListed(command.request_id, found)

    def _commit(self, command: CommitOffsets, now: int) -> CommitCompleted:
        problem = self._reachable(now)
        if problem is not None:
            return CommitCompleted(command.request_id, error_code=problem)
        if self.faults.commit_errors:
            code = self.faults.commit_errors.popleft()
            return CommitCompleted(command.request_id, dict.fromkeys(command.offsets, code))
        codes = self._coordinator.commit(command)
        accepted = {tp: offset for tp, offset in command.offsets.items() if not codes.get(tp)}
        if accepted and self._on_committed is not None:
            self._on_committed(self.name, accepted, now)
        return CommitCompleted(command.request_id, codes)

    def _fetch(self, command: FetchCommittedOffsets, now: int) -> CommittedOffsetsFetched:
        problem = self._reachable(now)
        if problem is not None:
            return CommittedOffsetsFetched(command.request_id, error_code=problem)
        offsets, code = self._coordinator.fetch(command)
        return CommittedOffsetsFetched(command.request_id, offsets, code)
