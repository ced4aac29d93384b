"""The share member's parts, its rules engine, and the effects its rules table names.

:class:`ShareMemberEffects` holds what a share member is made of (the state cell, the heartbeat
manager, the assignment manager, its epoch and subscription) and implements
:meth:`ShareMemberEffects.decide`: look up the row of :data:`~consumer.share.rules.SHARE_RULES`
for an outcome, enter its state, run its effects in order, and decide again on any outcome an
effect reports. :class:`consumer.share.member.ShareMember` adds the input handling on top.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from consumer.member.commands import FindCoordinator, ReportError, ShutDown
from consumer.member.effects import error_report
from consumer.member.errors import FatalMemberError
from consumer.member.errors_table import error_name
from consumer.member.machine import Rule, StateCell
from consumer.member.pacing import earliest_ms
from consumer.member.partitions import Assignment
from consumer.member.states import Heartbeats, StateInfo
from consumer.share.assignment import ShareAssignmentManager, ShareStep
from consumer.share.commands import SendShareHeartbeat, ShareCommand
from consumer.share.config import ShareMemberConfig
from consumer.share.heartbeat import ShareHeartbeatManager
from consumer.share.rules import SHARE_RULES, ShareEffect, ShareGuard, ShareOutcome
from consumer.share.states import SHARE_STATES, ShareState

ShareRule = Rule[ShareState, ShareOutcome, ShareEffect, ShareGuard]
ShareTransitionObserver = Callable[[ShareState, ShareRule], None]


class ShareMemberEffects:
    """A share member's parts and the implementation of every
    :class:`~consumer.share.rules.ShareEffect`."""

    def __init__(
        self,
        config: ShareMemberConfig,
        rng: random.Random,
        on_transition: ShareTransitionObserver | None,
    ) -> None:
        self.config = config
        self._cell: StateCell[ShareState, ShareOutcome, ShareEffect, ShareGuard] = StateCell(
            ShareState.UNSUBSCRIBED, on_transition
        )
        ids = itertools.count(1)
        self._next_id: Callable[[], int] = lambda: next(ids)
        self.heartbeats = ShareHeartbeatManager(config, rng, self._next_id)
        self.assignment = ShareAssignmentManager(self._next_id)
        self._epoch = 0
        self._topic_names: tuple[str, ...] = ()
        self._last_poll_ms: int | None = None
        self._polled_while_stale = False
        self._closing = False
        self._shut_down = False
        self._fatal_error: FatalMemberError | None = None
        #: The error behind the outcome being decided (code, message), for the reports.
        self._cause: tuple[int | None, str | None] = (None, None)
        #: The current state's row of the states table (kept in step with the state).
        self.info: StateInfo = SHARE_STATES[self._cell.state]
        self._effects: dict[ShareEffect, Callable[[int], ShareStep]] = {
            effect: getattr(self, f"_{effect.name.lower()}") for effect in ShareEffect
        }

    # --- read-only view ---------------------------------------------------------------------

    @property
    def state(self) -> ShareState:
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
    def topic_names(self) -> tuple[str, ...]:
        """Subscribed topic names, sorted (empty when not subscribed)."""
        return self._topic_names

    @property
    def target(self) -> Assignment:
        """The coordinator's latest target, by topic id."""
        return self.assignment.target

    @property
    def owned(self) -> Assignment:
        """The partitions the data plane confirmed it fetches, by topic id."""
        return self.assignment.owned

    @property
    def is_shut_down(self) -> bool:
        """True once :class:`ShutDown` was emitted."""
        return self._shut_down

    def _next_deadline_ms(self) -> int | None:
        info = self.info
        heartbeats = self.heartbeats
        last_poll_ms = self._last_poll_ms
        return earliest_ms(
            heartbeats.next_due_ms(info),
            (
                heartbeats.coordinator_lookup_due_ms()
                if info.heartbeats is not Heartbeats.NONE
                else None
            ),
            (
                last_poll_ms + self.config.max_poll_interval_ms
                if info.in_group and last_poll_ms is not None
                else None
            ),
        )

    # --- the engine -------------------------------------------------------------------------

    def decide(self, outcome: ShareOutcome | None, now_ms: int) -> list[ShareCommand]:
        """Apply the rules table to ``outcome`` (and to any outcome its effects report)."""
        commands: list[ShareCommand] = []
        while outcome is not None:
            rule = SHARE_RULES.decide(self._cell.state, outcome, self._holds)
            if rule is None:
                break
            self._cell.enter(rule)
            self.info = SHARE_STATES[self._cell.state]
            outcome = None
            for effect in rule.effects:
                more, reported = self._effects[effect](now_ms)
                commands += more
                outcome = reported or outcome
        return commands

    def follow(self, step: ShareStep, now_ms: int) -> list[ShareCommand]:
        """Commands of a manager's step, then what the rules make of its outcome."""
        commands, outcome = step
        return commands + self.decide(outcome, now_ms) if outcome is not None else commands

    def _holds(self, guard: ShareGuard) -> bool:
        if guard is ShareGuard.TARGET_OWNED:
            return self.assignment.target_reached()
        if guard is ShareGuard.TARGET_NOT_OWNED:
            return not self.assignment.target_reached()
        if guard is ShareGuard.RELEASING:
            return self.assignment.round is not None
        return self._polled_while_stale  # ShareGuard.POLLED_WHILE_STALE

    # --- effects (one method per ShareEffect, named after it) --------------------------------

    def _start_joining(self, now_ms: int) -> ShareStep:
        self._epoch = 0
        self._polled_while_stale = False
        self._last_poll_ms = now_ms
        self.assignment.reset()
        self.heartbeats.reset_for_rejoin(now_ms)
        return [], None

    def _expedite_heartbeat(self, now_ms: int) -> ShareStep:
        self.heartbeats.expedite()
        return [], None

    def _remember_poll(self, now_ms: int) -> ShareStep:
        self._polled_while_stale = True
        return [], None

    def _release_all(self, now_ms: int) -> ShareStep:
        return self.assignment.start_release()

    def _send_leave_heartbeat(self, now_ms: int) -> ShareStep:
        if not self.heartbeats.coordinator_known:
            return [], None
        request_id = self._next_id()
        return [SendShareHeartbeat(request_id, self.heartbeats.build_leave(request_id))], None

    def _end_membership(self, now_ms: int) -> ShareStep:
        self._epoch = 0
        self._polled_while_stale = False
        self.heartbeats.reset_for_rejoin(now_ms)
        self.assignment.abort()
        self.assignment.set_target(frozenset())
        return [], None

    def _rejoin_if_subscribed(self, now_ms: int) -> ShareStep:
        if self._topic_names and not self._closing:
            return [], ShareOutcome.SUBSCRIBED
        return [], None

    def _report_poll_timeout(self, now_ms: int) -> ShareStep:
        message = "the application did not poll within max.poll.interval.ms; left the group"
        report = ReportError(None, "MAX_POLL_INTERVAL_EXCEEDED", message, fatal=False)
        return [report], None

    def _report_fatal(self, now_ms: int) -> ShareStep:
        code, message = self._cause
        assert code is not None
        self._fatal_error = FatalMemberError(code, error_name(code), message)
        return [error_report(code, message, fatal=True)], None

    def _retry_lookup(self, now_ms: int) -> ShareStep:
        self.heartbeats.on_lookup_failed(now_ms)
        self.heartbeats.on_coordinator_lost()
        return [], None

    def _report_unreachable(self, now_ms: int) -> ShareStep:
        if self.heartbeats.failed_attempts != 1:
            return [], None  # once per outage, not once per retry
        code, reason = self._cause
        report = ReportError(
            error_code=code,
            error_name="COORDINATOR_UNAVAILABLE" if code is None else error_name(code),
            message=f"the group coordinator cannot be reached: {reason or ''}",
            fatal=False,
        )
        return [report], None

    def _find_coordinator(self, now_ms: int) -> ShareStep:
        if self.heartbeats.should_request_coordinator(now_ms):
            return [FindCoordinator(self.config.group_id)], None
        return [], None

    def _shut_down_if_closing(self, now_ms: int) -> ShareStep:
        return self._shut_down_now(now_ms) if self._closing else ([], None)

    def _shut_down_now(self, now_ms: int) -> ShareStep:
        self._shut_down = True
        return [ShutDown()], None
