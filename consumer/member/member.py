"""The Member: one consumer group member driven by inputs and time, emitting commands.

Driving contract (sans-I/O): feed every input with :meth:`Member.handle`, then call
:meth:`Member.poll` (after each batch of inputs, and again at the deadline it returns). Both return
commands to execute in order. Nothing here reads a clock, sleeps, locks or opens a socket; one
thread owns a member.
"""

from __future__ import annotations

import itertools
import random

from transitions import Machine, MachineError

from consumer.member.assignment import AssignmentManager, ReconcileStart, RoundKind, RoundResult
from consumer.member.commands import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Command,
    CommitReason,
    FindCoordinator,
    ReportError,
    SendHeartbeat,
    ShutDown,
)
from consumer.member.commit import CommitRequestManager
from consumer.member.config import MemberConfig
from consumer.member.errors import FatalMemberError, MemberStateError
from consumer.member.errors_table import HeartbeatErrorAction, error_name, heartbeat_error_action
from consumer.member.heartbeat import ExponentialBackoff, HeartbeatContent, HeartbeatRequestManager
from consumer.member.inputs import (
    AppPolled,
    AssignmentApplied,
    CallbackCompleted,
    CloseOption,
    CloseRequested,
    CommitCompleted,
    CommitRequested,
    CommittedOffsetsFetched,
    ConsumedOffsetsReported,
    CoordinatorChanged,
    CoordinatorLost,
    FetchingStopped,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    Input,
    MetadataResolved,
    PollIntervalExpired,
    RevocationCompleted,
    Subscribed,
    Unsubscribed,
)
from consumer.member.partitions import TopicPartition
from consumer.member.states import (
    HEARTBEATING_STATES,
    IN_GROUP_STATES,
    MemberState,
    Trigger,
    machine_transitions,
)

S = MemberState


class _StateHolder:
    """The model object of the ``transitions.Machine`` (only carries ``state``)."""

    state: MemberState


class Member:
    """A KIP-848 consumer group member (client side), as a sans-I/O state machine.

    Args:
        config: the member's settings.
        random: the random source for the member id and backoff jitter. Use
            ``random.SystemRandom()`` in production; a seeded ``random.Random`` in tests.
    """

    def __init__(self, config: MemberConfig, random: random.Random) -> None:
        self.config = config
        self._holder = _StateHolder()
        self._machine = Machine(
            model=self._holder,
            states=MemberState,
            transitions=machine_transitions(),
            initial=S.UNSUBSCRIBED,
            auto_transitions=False,
        )
        self._ids = itertools.count(1)
        self.heartbeats = HeartbeatRequestManager(config, random)
        backoff = ExponentialBackoff(
            config.retry_backoff_ms,
            config.retry_backoff_max_ms,
            config.retry_backoff_jitter,
            random,
        )
        self.commits = CommitRequestManager(config, backoff, self._next_id, self._commit_identity)
        self.assignment = AssignmentManager(config, self.commits, self._next_id)
        self._epoch = 0
        self._topic_names: tuple[str, ...] | None = None
        self._topic_regex: str | None = None
        self._join_pending = False
        self._last_poll_ms: int | None = None
        self._polled_while_stale = False
        self._closing: CloseOption | None = None
        self._shut_down = False
        self._fatal_error: FatalMemberError | None = None

    # --- read-only view ---------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        """The current state."""
        return self._holder.state

    @property
    def member_id(self) -> str:
        """The client-generated member id (kept for the member's lifetime, across fencing)."""
        return self.heartbeats.member_id

    @property
    def member_epoch(self) -> int:
        """The latest member epoch from the coordinator (0 when not in the group)."""
        return self._epoch

    @property
    def owned_partitions(self) -> tuple[TopicPartition, ...]:
        """The partitions the member owns (reconciled), sorted."""
        return self.assignment.owned_named

    @property
    def is_shut_down(self) -> bool:
        """True once :class:`ShutDown` was emitted."""
        return self._shut_down

    # --- driving ----------------------------------------------------------------------------

    def handle(self, event: Input, now_ms: int) -> list[Command]:
        """Feed one input; returns the commands it causes. Call :meth:`poll` afterwards.

        Raises:
            FatalMemberError: subscribing or committing on a member in FATAL state.
            MemberStateError: an input that is not allowed (for example subscribing after close).
        """
        out: list[Command] = []
        if self._shut_down:
            if isinstance(event, Subscribed | CommitRequested):
                raise MemberStateError("the member is shut down")
            return out
        self._dispatch(event, now_ms, out)
        self._advance(now_ms, out)
        return out

    def _dispatch(self, event: Input, now_ms: int, out: list[Command]) -> None:  # noqa: C901
        match event:
            case Subscribed():
                self._on_subscribed(event, now_ms, out)
            case Unsubscribed():
                self._on_unsubscribed(event, now_ms, out)
            case AppPolled():
                self._on_app_polled(event, now_ms, out)
            case ConsumedOffsetsReported():
                self.commits.record_consumed(event.offsets)
            case CommitRequested():
                self._on_commit_requested(event, now_ms, out)
            case PollIntervalExpired():
                if self.state in IN_GROUP_STATES:
                    self._expire_poll_interval(now_ms, out)
            case CloseRequested():
                self._on_close_requested(event, now_ms, out)
            case FetchingStopped():
                self.commits.record_consumed(event.consumed_offsets)
                result = self.assignment.on_fetching_stopped(event, now_ms, out)
                self._on_round_result(result, now_ms, out)
            case RevocationCompleted():
                result = self.assignment.on_revocation_completed(event, out)
                self._on_round_result(result, now_ms, out)
            case CallbackCompleted():
                result = self.assignment.on_callback_completed(event, out)
                self._on_round_result(result, now_ms, out)
            case AssignmentApplied():
                result = self.assignment.on_assignment_applied(event, out)
                self._on_round_result(result, now_ms, out)
            case HeartbeatSucceeded():
                self._on_heartbeat_succeeded(event, now_ms, out)
            case HeartbeatFailed():
                self._on_heartbeat_failed(event, now_ms, out)
            case HeartbeatTransportFailed():
                self._on_heartbeat_transport_failed(event, now_ms, out)
            case CoordinatorChanged():
                self.heartbeats.on_coordinator_changed()
            case CoordinatorLost():
                self._on_coordinator_lost(event, now_ms, out)
            case MetadataResolved():
                self.assignment.learn_names(event.topic_names)
            case CommitCompleted():
                self._on_commit_completed(event, now_ms, out)
            case CommittedOffsetsFetched():
                self._on_offsets_fetched(event, now_ms, out)
            case _:
                raise MemberStateError(f"unknown input {event!r}")

    def poll(self, now_ms: int) -> tuple[list[Command], int | None]:
        """Run timers: returns the commands due now and the next deadline (None: wait for input)."""
        out: list[Command] = []
        if self._shut_down:
            return out, None
        state = self.state
        if (
            state in IN_GROUP_STATES
            and self._last_poll_ms is not None
            and now_ms - self._last_poll_ms >= self.config.max_poll_interval_ms
        ):
            self._expire_poll_interval(now_ms, out)
        for job_id in self.commits.poll(now_ms, out):
            self._on_round_result(self.assignment.on_commit_finished(job_id, out), now_ms, out)
        self._on_round_result(self.assignment.check_deadline(now_ms, out), now_ms, out)
        self._advance(now_ms, out)
        if (
            self.config.auto_commit
            and self.commits.auto_commit_due(now_ms)  # before building the owned list
            and self.state in IN_GROUP_STATES
            and self._epoch > 0
        ):
            self.commits.maybe_auto_commit(now_ms, self.owned_partitions, out)
        self._maybe_heartbeat(now_ms, out)
        return out, self._next_deadline_ms()

    def _next_deadline_ms(self) -> int | None:
        times: list[int] = []
        if self.state in HEARTBEATING_STATES:
            for due in (
                self.heartbeats.next_due_ms(self.state),
                self.heartbeats.coordinator_lookup_due_ms(),
            ):
                if due is not None:
                    times.append(due)
        if self.state in IN_GROUP_STATES and self._last_poll_ms is not None:
            times.append(self._last_poll_ms + self.config.max_poll_interval_ms)
        for extra in (self.commits.next_deadline_ms(), self.assignment.next_deadline_ms()):
            if extra is not None:
                times.append(extra)
        return min(times) if times else None

    def _next_id(self) -> int:
        return next(self._ids)

    def _commit_identity(self) -> tuple[str | None, int]:
        if self.state in HEARTBEATING_STATES and self._epoch > 0:
            return self.member_id, self._epoch
        return None, -1

    def _fire(self, trigger: Trigger) -> None:
        try:
            self._machine.events[trigger.value].trigger(self._holder)
        except MachineError as exc:  # pragma: no cover - guarded by the callers
            raise MemberStateError(f"{trigger.value} not allowed from {self.state.name}") from exc

    # --- application side -------------------------------------------------------------------

    def _on_subscribed(self, event: Subscribed, now_ms: int, out: list[Command]) -> None:
        if self._fatal_error is not None:
            raise self._fatal_error
        if self._closing is not None:
            raise MemberStateError("cannot subscribe: the member is closing")
        if event.topic_names is not None and not event.topic_names:
            self._on_unsubscribed(Unsubscribed(), now_ms, out)
            return
        self._topic_names = tuple(sorted(set(event.topic_names))) if event.topic_names else None
        self._topic_regex = event.topic_regex
        if self.state in (S.UNSUBSCRIBED, S.UNSUBSCRIBING):
            self._join_pending = True

    def _on_unsubscribed(self, event: Unsubscribed, now_ms: int, out: list[Command]) -> None:
        self._topic_names = None
        self._topic_regex = None
        self._join_pending = False
        if self.state in IN_GROUP_STATES:
            self._begin_leaving(now_ms, out)
        elif self.state in (S.FENCED, S.STALE):
            self._fire(Trigger.ABANDON)

    def _on_app_polled(self, event: AppPolled, now_ms: int, out: list[Command]) -> None:
        if event.consumed_offsets:
            self.commits.record_consumed(event.consumed_offsets)
        polled_ms = now_ms if event.polled_at_ms is None else min(now_ms, event.polled_at_ms)
        if self._last_poll_ms is None or polled_ms > self._last_poll_ms:
            self._last_poll_ms = polled_ms
        if self.state is S.UNSUBSCRIBED and self._join_pending:
            self._join(now_ms)
        elif self.state is S.STALE:
            self._polled_while_stale = True
            if self.assignment.round is None:
                self._join(now_ms)

    def _on_commit_requested(self, event: CommitRequested, now_ms: int, out: list[Command]) -> None:
        if self._fatal_error is not None:
            raise self._fatal_error
        offsets = (
            event.offsets
            if event.offsets is not None
            else self.commits.uncommitted(self.owned_partitions)
        )
        deadline_ms = None if event.timeout_ms is None else now_ms + event.timeout_ms
        self.commits.start_commit(
            CommitReason.USER, offsets, now_ms, out, deadline_ms=deadline_ms, token=event.token
        )

    def _on_close_requested(self, event: CloseRequested, now_ms: int, out: list[Command]) -> None:
        self._closing = event.option
        self._join_pending = False
        if self.state in IN_GROUP_STATES:
            self._begin_leaving(now_ms, out)
            return
        if self.state in (S.FENCED, S.STALE):
            self._fire(Trigger.ABANDON)
        if self.state is not S.UNSUBSCRIBING:
            self._shut_down_now(out)

    def _shut_down_now(self, out: list[Command]) -> None:
        self._shut_down = True
        out.append(ShutDown())

    # --- callbacks and data plane -----------------------------------------------------------

    def _on_heartbeat_succeeded(
        self, event: HeartbeatSucceeded, now_ms: int, out: list[Command]
    ) -> None:
        hb = self.heartbeats
        if hb.is_leave(event.request_id) or not hb.is_current(event.request_id):
            return
        hb.on_success(event.heartbeat_interval_ms, now_ms)
        # A negative or lower epoch is a stale answer (KAFKA-19335): ignore it entirely.
        if event.member_epoch < 0 or event.member_epoch < self._epoch:
            return
        if event.member_epoch != self._epoch:
            self._epoch = event.member_epoch
            self.commits.on_epoch_changed(out)
        if self.state not in IN_GROUP_STATES:
            return
        changed = event.assignment is not None and self.assignment.set_target(event.assignment)
        if self.state is S.JOINING:
            self._fire(Trigger.SETTLE if self.assignment.target_reached() else Trigger.RECONCILE)
        elif self.state is S.STABLE and not self.assignment.target_reached():
            self._fire(Trigger.RECONCILE)
        elif self.state is S.RECONCILE_ASSIGNMENT and changed:
            self._fire(Trigger.RECONCILE)  # newer target: the running round finishes first

    def _on_heartbeat_failed(self, event: HeartbeatFailed, now_ms: int, out: list[Command]) -> None:
        hb = self.heartbeats
        if hb.is_leave(event.request_id) or not hb.is_current(event.request_id):
            return
        action = heartbeat_error_action(event.error_code)
        if action is HeartbeatErrorAction.RETRY:
            hb.on_failure(now_ms, reset_backoff=False)
        elif action is HeartbeatErrorAction.REDISCOVER_COORDINATOR:
            hb.on_failure(now_ms, reset_backoff=True)
            self._lose_coordinator(now_ms, out)
        elif action is HeartbeatErrorAction.REPORT:
            hb.on_failure(now_ms, reset_backoff=False)
            out.append(_error_report(event.error_code, event.error_message, fatal=False))
        elif action is HeartbeatErrorAction.FENCE:
            self._fence(now_ms, out)
        elif action is HeartbeatErrorAction.FATAL_UNLESS_LEAVING and self.state is S.UNSUBSCRIBING:
            self._finish_leaving(out, Trigger.FINISH_LEAVING)  # the group is gone: nothing to leave
        else:
            self._fail(event.error_code, event.error_message, now_ms, out)

    def _on_heartbeat_transport_failed(
        self, event: HeartbeatTransportFailed, now_ms: int, out: list[Command]
    ) -> None:
        hb = self.heartbeats
        if hb.is_leave(event.request_id) or not hb.is_current(event.request_id):
            return
        hb.on_failure(now_ms, reset_backoff=False)
        self._lose_coordinator(now_ms, out)

    def _on_coordinator_lost(self, event: CoordinatorLost, now_ms: int, out: list[Command]) -> None:
        """A lookup failed or the coordinator connection is gone: fail, or look up after backoff."""
        code = event.error_code
        if code is not None and self.state in HEARTBEATING_STATES:
            action = heartbeat_error_action(code)
            leaving = self.state is S.UNSUBSCRIBING
            if action is HeartbeatErrorAction.FATAL or (
                action is HeartbeatErrorAction.FATAL_UNLESS_LEAVING and not leaving
            ):
                self._fail(code, event.reason or None, now_ms, out)
                return
        self.heartbeats.on_lookup_failed(now_ms)
        if self.state in HEARTBEATING_STATES and self.heartbeats.failed_attempts == 1:
            # Once per outage, not once per retry: the application learns the group is
            # unreachable (as librdkafka's error_cb does), the member keeps trying.
            out.append(
                ReportError(
                    error_code=code,
                    error_name="COORDINATOR_UNAVAILABLE" if code is None else error_name(code),
                    message=f"the group coordinator cannot be reached: {event.reason}",
                    fatal=False,
                )
            )
        self._lose_coordinator(now_ms, out)

    def _lose_coordinator(self, now_ms: int, out: list[Command]) -> None:
        self.heartbeats.on_coordinator_lost()
        if self.state in HEARTBEATING_STATES and self.heartbeats.should_request_coordinator(now_ms):
            out.append(FindCoordinator(self.config.group_id))

    def _on_commit_completed(self, event: CommitCompleted, now_ms: int, out: list[Command]) -> None:
        job_id, wants_heartbeat = self.commits.on_commit_completed(event, now_ms, out)
        if wants_heartbeat:
            self.heartbeats.expedite()
        if job_id is not None:
            self._on_round_result(self.assignment.on_commit_finished(job_id, out), now_ms, out)

    def _on_offsets_fetched(
        self, event: CommittedOffsetsFetched, now_ms: int, out: list[Command]
    ) -> None:
        outcome = self.commits.on_fetch_completed(event, now_ms, out)
        if isinstance(outcome, tuple):
            job_id, offsets = outcome
            self._on_round_result(
                self.assignment.on_offsets_fetched(job_id, offsets, out), now_ms, out
            )
        elif outcome:
            self.heartbeats.expedite()

    # --- lifecycle steps --------------------------------------------------------------------

    def _advance(self, now_ms: int, out: list[Command]) -> None:
        if self.state is not S.RECONCILE_ASSIGNMENT:
            return
        started = self.assignment.start_reconcile(now_ms, out)
        if started is ReconcileStart.SETTLED:
            self._fire(Trigger.SETTLE)
        elif started is ReconcileStart.ACKNOWLEDGE:
            self._fire(Trigger.ACKNOWLEDGE)

    def _maybe_heartbeat(self, now_ms: int, out: list[Command]) -> None:
        state = self.state
        if state not in HEARTBEATING_STATES:
            return
        hb = self.heartbeats
        if hb.should_request_coordinator(now_ms):
            out.append(FindCoordinator(self.config.group_id))
        if not hb.is_due(state, now_ms):
            return
        content = HeartbeatContent(
            state=state,
            member_epoch=self._epoch,
            topic_names=self._topic_names,
            topic_regex=self._topic_regex,
            owned=self.assignment.current,
            owned_local_epoch=self.assignment.current_local_epoch,
        )
        request_id = self._next_id()
        out.append(SendHeartbeat(request_id, hb.build(content, request_id, now_ms)))
        if state is S.ACK_ASSIGNMENT:
            reached = self.assignment.target_reached()
            self._fire(Trigger.SETTLE if reached else Trigger.RECONCILE)
            self._advance(now_ms, out)

    def _join(self, now_ms: int) -> None:
        self._fire(Trigger.JOIN)
        self._epoch = 0
        self._join_pending = False
        self._polled_while_stale = False
        self._last_poll_ms = now_ms
        self.assignment.reset()
        self.heartbeats.reset_for_rejoin(now_ms)

    def _leave_group_state(self, now_ms: int, out: list[Command]) -> None:
        """Common reset when the member stops being part of the group."""
        self._epoch = 0
        self.heartbeats.reset_for_rejoin(now_ms)
        self.commits.abort_group_work(out)
        self.commits.stop_auto_commit_timer()
        self.assignment.abort()
        self.assignment.target = frozenset()

    def _fence(self, now_ms: int, out: list[Command]) -> None:
        if self.state is S.UNSUBSCRIBING:
            self._finish_leaving(out, Trigger.FENCE)  # the broker dropped us: no leave heartbeat
            return
        self._fire(Trigger.FENCE)
        self._leave_group_state(now_ms, out)
        release = self.assignment.start_release(RoundKind.LOSE_ALL, now_ms, out, CommitReason.AUTO)
        self._on_round_result(release, now_ms, out)

    def _fail(self, error_code: int, message: str | None, now_ms: int, out: list[Command]) -> None:
        previous = self.state
        out.append(_error_report(error_code, message, fatal=True))
        self._fatal_error = FatalMemberError(error_code, error_name(error_code), message)
        self._fire(Trigger.FAIL)
        self._epoch = 0
        self.heartbeats.reset_for_rejoin(now_ms)
        self.commits.abort_group_work(out)
        self.commits.stop_auto_commit_timer()
        self.assignment.abort()
        if previous is not S.UNSUBSCRIBING:
            self.assignment.start_release(RoundKind.LOSE_ALL, now_ms, out, CommitReason.AUTO)
        if self._closing is not None:
            self._shut_down_now(out)

    def _expire_poll_interval(self, now_ms: int, out: list[Command]) -> None:
        out.append(
            ReportError(
                error_code=None,
                error_name="MAX_POLL_INTERVAL_EXCEEDED",
                message="the application did not poll within max.poll.interval.ms; left the group",
                fatal=False,
            )
        )
        self._send_leave_heartbeat(out)
        self._fire(Trigger.EXPIRE_POLL_INTERVAL)
        self._polled_while_stale = False
        self._leave_group_state(now_ms, out)
        release = self.assignment.start_release(RoundKind.LOSE_ALL, now_ms, out, CommitReason.AUTO)
        self._on_round_result(release, now_ms, out)

    def _begin_leaving(self, now_ms: int, out: list[Command]) -> None:
        self._fire(Trigger.LEAVE)
        self.assignment.abort()
        self.commits.stop_auto_commit_timer()
        kind = RoundKind.REVOKE_ALL if self._epoch > 0 else RoundKind.LOSE_ALL
        reason = CommitReason.CLOSE if self._closing is not None else CommitReason.PRE_REVOKE
        self._on_round_result(self.assignment.start_release(kind, now_ms, out, reason), now_ms, out)

    def _leave_epoch(self) -> int | None:
        static = self.config.instance_id is not None
        if self._closing is CloseOption.LEAVE_GROUP or not static:
            return None if self._closing is CloseOption.REMAIN_IN_GROUP else LEAVE_EPOCH
        return STATIC_LEAVE_EPOCH

    def _send_leave_heartbeat(self, out: list[Command]) -> None:
        epoch = self._leave_epoch()
        if epoch is not None and self.heartbeats.coordinator_known:
            request_id = self._next_id()
            out.append(SendHeartbeat(request_id, self.heartbeats.build_leave(epoch, request_id)))

    def _finish_leaving(self, out: list[Command], trigger: Trigger) -> None:
        self._fire(trigger)
        self._leave_group_state(0, out)
        self.assignment.reset()
        if self._closing is not None:
            self._shut_down_now(out)

    def _on_round_result(self, result: RoundResult | None, now_ms: int, out: list[Command]) -> None:
        if result is None:
            return
        state = self.state
        if result.kind is RoundKind.RECONCILE:
            if result.timed_out:
                self._fence(now_ms, out)
                return
            self.commits.reset_auto_commit_timer(now_ms)
            self._fire(Trigger.ACKNOWLEDGE)
        elif state is S.UNSUBSCRIBING:
            self._send_leave_heartbeat(out)
            self._finish_leaving(out, Trigger.FINISH_LEAVING)
        elif state is S.FENCED or (state is S.STALE and self._polled_while_stale):
            self._join(now_ms)


def _error_report(error_code: int, message: str | None, *, fatal: bool) -> ReportError:
    name = error_name(error_code)
    return ReportError(
        error_code=error_code,
        error_name=name,
        message=message or f"heartbeat failed with {name}",
        fatal=fatal,
    )
