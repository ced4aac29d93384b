"""The member's parts, its rules engine, and the effects the rules table names.

:class:`MemberEffects` holds what a member is made of (the state cell, the three request
managers, its epoch and subscription) and implements :meth:`MemberEffects.decide`: look up the
row for an outcome, enter its state, run its effects in order, and decide again on any outcome an
effect reports. :class:`consumer.member.member.Member` adds the input handling on top.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from consumer.member.assignment import AssignmentManager
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
from consumer.member.errors import FatalMemberError
from consumer.member.errors_table import error_name
from consumer.member.heartbeat import HeartbeatRequestManager
from consumer.member.inputs import CloseOption
from consumer.member.machine import Rule, StateCell
from consumer.member.pacing import ExponentialBackoff, earliest_ms, finds_coordinator
from consumer.member.partitions import TopicIdPartition, TopicPartition
from consumer.member.round import Step
from consumer.member.rules import RULES, Effect, Guard, Outcome, RoundKind
from consumer.member.states import STATES, Heartbeats, MemberState, StateInfo

MemberRule = Rule[MemberState, Outcome, Effect, Guard]
TransitionObserver = Callable[[MemberState, MemberRule], None]


def error_report(error_code: int, message: str | None, *, fatal: bool) -> ReportError:
    """The ReportError for a heartbeat error."""
    name = error_name(error_code)
    return ReportError(
        error_code=error_code,
        error_name=name,
        message=message or f"heartbeat failed with {name}",
        fatal=fatal,
        heartbeat=True,
    )


class MemberEffects:
    """A member's parts and the implementation of every :class:`~consumer.member.rules.Effect`."""

    def __init__(
        self, config: MemberConfig, rng: random.Random, on_transition: TransitionObserver | None
    ) -> None:
        self.config = config
        self._cell: StateCell[MemberState, Outcome, Effect, Guard] = StateCell(
            MemberState.UNSUBSCRIBED, on_transition
        )
        ids = itertools.count(1)
        self._next_id: Callable[[], int] = lambda: next(ids)
        self.heartbeats = HeartbeatRequestManager(config, rng, self._next_id)
        backoff = ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms, config.retry_backoff_jitter, rng
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
        #: The error behind the outcome being decided (code, message), for the reports.
        self._cause: tuple[int | None, str | None] = (None, None)
        #: The current state's row of the states table (kept in step with the state).
        self.info: StateInfo = STATES[self._cell.state]
        self._effects: dict[Effect, Callable[[int], Step]] = {
            effect: getattr(self, f"_{effect.name.lower()}") for effect in Effect
        }

    # --- read-only view ---------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        """The current state."""
        return self._cell.state

    @property
    def member_id(self) -> str:
        """The client-generated member id (kept for the member's lifetime, across fencing)."""
        return self.heartbeats.member_id

    @property
    def member_epoch(self) -> int:
        """The latest member epoch from the coordinator (0 when not in the group)."""
        return self._epoch

    @property
    def topic_names(self) -> tuple[str, ...] | None:
        """Subscribed topic names, sorted (None with a regex subscription or none)."""
        return self._topic_names

    @property
    def topic_regex(self) -> str | None:
        """The subscribed broker-side regex, or None."""
        return self._topic_regex

    @property
    def reported_owned_ids(self) -> frozenset[TopicIdPartition]:
        """The partitions heartbeats report as owned, by topic id (see
        :attr:`AssignmentManager.reported_owned`)."""
        return self.assignment.reported_owned

    @property
    def owned_local_epoch(self) -> int:
        """The local epoch of the owned assignment."""
        return self.assignment.current_local_epoch

    @property
    def owned_partitions(self) -> tuple[TopicPartition, ...]:
        """The partitions the member owns (reconciled), sorted."""
        return self.assignment.owned_named

    @property
    def is_shut_down(self) -> bool:
        """True once :class:`ShutDown` was emitted."""
        return self._shut_down

    def _commit_identity(self) -> tuple[str | None, int]:
        if self.info.heartbeats is not Heartbeats.NONE and self._epoch > 0:
            return self.member_id, self._epoch
        return None, -1

    def _subscribe(self, names: tuple[str, ...] | None, regex: str | None) -> None:
        self._topic_names = names
        self._topic_regex = regex
        if names is None and regex is None:
            self._join_pending = False

    def _next_deadline_ms(self) -> int | None:
        info = self.info
        heartbeats = self.heartbeats
        last_poll_ms = self._last_poll_ms
        return earliest_ms(
            heartbeats.next_due_ms(info),
            heartbeats.coordinator_lookup_due_ms() if finds_coordinator(info) else None,
            self.commits.next_deadline_ms(),
            self.assignment.next_deadline_ms(),
            (
                last_poll_ms + self.config.max_poll_interval_ms
                if info.in_group and last_poll_ms is not None
                else None
            ),
        )

    # --- the engine -------------------------------------------------------------------------

    def decide(self, outcome: Outcome | None, now_ms: int) -> list[Command]:
        """Apply the rules table to ``outcome`` (and to any outcome its effects report)."""
        commands: list[Command] = []
        while outcome is not None:
            rule = RULES.decide(self._cell.state, outcome, self._holds)
            if rule is None:
                break
            self._cell.enter(rule)
            self.info = STATES[self._cell.state]
            outcome = None
            for effect in rule.effects:
                more, reported = self._effects[effect](now_ms)
                commands += more
                outcome = reported or outcome
        return commands

    def follow(self, step: Step, now_ms: int) -> list[Command]:
        """Commands of a manager's step, then what the rules make of its outcome."""
        commands, outcome = step
        return commands + self.decide(outcome, now_ms) if outcome is not None else commands

    def _holds(self, guard: Guard) -> bool:
        if guard is Guard.JOIN_PENDING:
            return self._join_pending
        if guard is Guard.TARGET_OWNED:
            return self.assignment.target_reached()
        if guard is Guard.TARGET_NOT_OWNED:
            return not self.assignment.target_reached()
        if guard is Guard.RELEASING:
            return self.assignment.round is not None
        return self._polled_while_stale  # Guard.POLLED_WHILE_STALE

    # --- effects (one method per Effect, named after it) --------------------------------------

    def _mark_join_pending(self, now_ms: int) -> Step:
        self._join_pending = True
        return [], None

    def _start_joining(self, now_ms: int) -> Step:
        self._epoch = 0
        self._join_pending = False
        self._polled_while_stale = False
        self._last_poll_ms = now_ms
        self.assignment.reset()
        self.heartbeats.reset_for_rejoin(now_ms)
        self.heartbeats.look_up_without_backoff(now_ms)
        return [], None

    def _remember_poll(self, now_ms: int) -> Step:
        self._polled_while_stale = True
        return [], None

    def _release_for_leave(self, now_ms: int) -> Step:
        self.assignment.abort()
        self.commits.stop_auto_commit_timer()
        kind = RoundKind.REVOKE_ALL if self._epoch > 0 else RoundKind.LOSE_ALL
        reason = CommitReason.CLOSE if self._closing is not None else CommitReason.PRE_REVOKE
        return self.assignment.start_release(kind, now_ms, reason)

    def _release_as_lost(self, now_ms: int) -> Step:
        return self.assignment.start_release(RoundKind.LOSE_ALL, now_ms, CommitReason.AUTO)

    def _send_leave_heartbeat(self, now_ms: int) -> Step:
        static = self.config.instance_id is not None
        if self._closing is CloseOption.REMAIN_IN_GROUP and not static:
            return [], None
        epoch = STATIC_LEAVE_EPOCH
        if self._closing is CloseOption.LEAVE_GROUP or not static:
            epoch = LEAVE_EPOCH
        if not self.heartbeats.coordinator_known:
            return [], None
        request_id = self._next_id()
        return [SendHeartbeat(request_id, self.heartbeats.build_leave(epoch, request_id))], None

    def _end_membership(self, now_ms: int) -> Step:
        self._epoch = 0
        self._polled_while_stale = False
        self.heartbeats.reset_for_rejoin(now_ms)
        commands = self.commits.abort_group_work()
        self.assignment.abort()
        self.assignment.target = frozenset()
        return commands, None

    def _forget_assignment(self, now_ms: int) -> Step:
        self.assignment.reset()
        return [], None

    def _reset_auto_commit_timer(self, now_ms: int) -> Step:
        self.commits.reset_auto_commit_timer(now_ms)
        return [], None

    def _report_poll_timeout(self, now_ms: int) -> Step:
        message = "the application did not poll within max.poll.interval.ms; left the group"
        report = ReportError(None, "MAX_POLL_INTERVAL_EXCEEDED", message, fatal=False)
        return [report], None

    def _report_fatal(self, now_ms: int) -> Step:
        code, message = self._cause
        assert code is not None
        self._fatal_error = FatalMemberError(code, error_name(code), message)
        return [error_report(code, message, fatal=True)], None

    def _retry_lookup(self, now_ms: int) -> Step:
        self.heartbeats.on_lookup_failed(now_ms)
        self.heartbeats.on_coordinator_lost()
        return [], None

    def _look_up_at_join(self, now_ms: int) -> Step:
        self.heartbeats.postpone_lookup()
        return [], None

    def _look_up_again_now(self, now_ms: int) -> Step:
        self.heartbeats.on_coordinator_lost()
        self.heartbeats.look_up_without_backoff(now_ms)
        return [], None

    def _report_unreachable(self, now_ms: int) -> Step:
        if self.heartbeats.failed_attempts != 1:
            return [], None  # once per outage, not once per retry (as librdkafka's error_cb)
        code, reason = self._cause
        report = ReportError(
            error_code=code,
            error_name="COORDINATOR_UNAVAILABLE" if code is None else error_name(code),
            message=f"the group coordinator cannot be reached: {reason or ''}",
            fatal=False,
        )
        return [report], None

    def _find_coordinator(self, now_ms: int) -> Step:
        if self.heartbeats.should_request_coordinator(now_ms):
            return [FindCoordinator(self.config.group_id)], None
        return [], None

    def _shut_down_if_closing(self, now_ms: int) -> Step:
        return self._shut_down_now(now_ms) if self._closing is not None else ([], None)

    def _shut_down_now(self, now_ms: int) -> Step:
        self._shut_down = True
        return [ShutDown()], None
