"""The ShareMember: one KIP-932 share group member driven by inputs and time, emitting commands.

Driving contract (sans-I/O, as :class:`consumer.member.Member`): feed every input with
:meth:`ShareMember.handle`, then call :meth:`ShareMember.poll` (after each batch of inputs, and
again at the deadline it returns). Both return commands to execute in order. Nothing here reads a
clock, sleeps, locks or opens a socket; one thread owns a member.

The member feeds each input to its managers, turns what they report into a
:class:`~consumer.share.rules.ShareOutcome`, and lets
:data:`~consumer.share.rules.SHARE_RULES` decide the next state and the effects
(:mod:`consumer.share.effects` runs them).
"""

from __future__ import annotations

import random

from consumer.member.commands import FindCoordinator
from consumer.member.effects import error_report
from consumer.member.errors import MemberStateError
from consumer.member.errors_table import HeartbeatErrorAction, heartbeat_error_action
from consumer.share import inputs as i
from consumer.share.commands import ShareCommand
from consumer.share.config import ShareMemberConfig
from consumer.share.effects import ShareMemberEffects, ShareTransitionObserver
from consumer.share.heartbeat import Sent
from consumer.share.rules import (
    SHARE_HEARTBEAT_ERROR_ACTIONS,
    SHARE_HEARTBEAT_ERROR_OUTCOMES,
    SHARE_LOOKUP_ERROR_OUTCOMES,
    ShareOutcome,
)


class ShareMember(ShareMemberEffects):
    """A KIP-932 share group member (client side), as a sans-I/O state machine.

    Args:
        config: the member's settings.
        random: the random source for the member id and backoff jitter. Use
            ``random.SystemRandom()`` in production; a seeded ``random.Random`` in tests.
        on_transition: optional observer told ``(previous_state, rule)`` each time a row of the
            rules table fires (timelines, metrics, tests).
    """

    def __init__(
        self,
        config: ShareMemberConfig,
        random: random.Random,
        on_transition: ShareTransitionObserver | None = None,
    ) -> None:
        super().__init__(config, random, on_transition)

    # --- driving ----------------------------------------------------------------------------

    def handle(self, event: i.ShareInput, now_ms: int) -> list[ShareCommand]:
        """Feed one input; returns the commands it causes. Call :meth:`poll` afterwards.

        Raises:
            FatalMemberError: subscribing on a member in FATAL state.
            MemberStateError: subscribing after close, or an input that is not a share input.
        """
        if self._shut_down:
            if isinstance(event, i.Subscribed):
                raise MemberStateError("the share member is shut down")
            return []
        commands = self._dispatch(event, now_ms)
        return commands + self._reconcile(now_ms)

    def _dispatch(self, event: i.ShareInput, now_ms: int) -> list[ShareCommand]:  # noqa: C901
        a = self.assignment
        match event:
            case i.Subscribed():
                return self._on_subscribed(event, now_ms)
            case i.Unsubscribed():
                self._topic_names = ()
                return self.decide(ShareOutcome.UNSUBSCRIBE_REQUESTED, now_ms)
            case i.AppPolled():
                polled_ms = (
                    now_ms if event.polled_at_ms is None else min(now_ms, event.polled_at_ms)
                )
                if self._last_poll_ms is None or polled_ms > self._last_poll_ms:
                    self._last_poll_ms = polled_ms
                return self.decide(ShareOutcome.APP_POLLED, now_ms)
            case i.PollIntervalExpired():
                return self.decide(ShareOutcome.POLL_INTERVAL_EXPIRED, now_ms)
            case i.CloseRequested():
                self._closing = True
                return self.decide(ShareOutcome.CLOSE_REQUESTED, now_ms)
            case i.StoppedAndFlushed():
                return self.follow(a.on_stopped(event), now_ms)
            case i.ShareAssignmentApplied():
                return self.follow(a.on_applied(event), now_ms)
            case i.ShareHeartbeatSucceeded():
                return self._on_heartbeat_succeeded(event, now_ms)
            case i.ShareHeartbeatFailed():
                return self._on_heartbeat_failed(event, now_ms)
            case i.HeartbeatTransportFailed():
                if self.heartbeats.take_answer(event.request_id):
                    self.heartbeats.on_failure(now_ms, reset_backoff=False)
                    return self._lose_coordinator(now_ms)
            case i.CoordinatorChanged():
                self.heartbeats.on_coordinator_changed()
            case i.CoordinatorLost():
                return self._on_coordinator_lost(event, now_ms)
            case _:
                raise MemberStateError(f"not an input of the share member: {event!r}")
        return []

    def poll(self, now_ms: int) -> tuple[list[ShareCommand], int | None]:
        """Run timers: returns the commands due now and the next deadline (None: wait for input)."""
        if self._shut_down:
            return [], None
        commands: list[ShareCommand] = []
        last_poll_ms = self._last_poll_ms
        if last_poll_ms is not None and now_ms - last_poll_ms >= self.config.max_poll_interval_ms:
            commands += self.decide(ShareOutcome.POLL_INTERVAL_EXPIRED, now_ms)
        commands += self._reconcile(now_ms)
        heartbeats, sent = self.heartbeats.poll(now_ms, self.info, self._epoch, self._topic_names)
        commands += heartbeats
        if sent is Sent.LEAVE:
            commands += self.decide(ShareOutcome.LEAVE_SENT, now_ms)
        elif sent is Sent.HEARTBEAT:
            commands += self.decide(ShareOutcome.HEARTBEAT_SENT, now_ms) + self._reconcile(now_ms)
        return commands, self._next_deadline_ms()

    def _reconcile(self, now_ms: int) -> list[ShareCommand]:
        """In a state that reconciles, start the next round when none runs."""
        if not self.info.reconciles:
            return []
        return self.follow(self.assignment.start_reconcile(), now_ms)

    # --- inputs -----------------------------------------------------------------------------

    def _on_subscribed(self, event: i.Subscribed, now_ms: int) -> list[ShareCommand]:
        if self._fatal_error is not None:
            raise self._fatal_error
        if self._closing:
            raise MemberStateError("cannot subscribe: the share member is closing")
        if not event.topic_names:
            return self._dispatch(i.Unsubscribed(), now_ms)
        names = tuple(sorted(set(event.topic_names)))
        if names == self._topic_names:
            return []
        self._topic_names = names
        return self.decide(ShareOutcome.SUBSCRIBED, now_ms)

    def _on_heartbeat_succeeded(
        self, event: i.ShareHeartbeatSucceeded, now_ms: int
    ) -> list[ShareCommand]:
        if not self.heartbeats.take_answer(event.request_id):
            return []
        self.heartbeats.on_success(event.heartbeat_interval_ms, now_ms)
        # A negative or lower epoch is a stale answer: ignore it entirely.
        if event.member_epoch < 0 or event.member_epoch < self._epoch:
            return []
        self._epoch = event.member_epoch
        if not self.info.in_group:
            return []
        if event.assignment is not None:
            self.assignment.set_target(event.assignment)
        return self.decide(ShareOutcome.TARGET_RECEIVED, now_ms)

    def _on_heartbeat_failed(
        self, event: i.ShareHeartbeatFailed, now_ms: int
    ) -> list[ShareCommand]:
        if not self.heartbeats.take_answer(event.request_id):
            return []
        action = heartbeat_error_action(event.error_code, SHARE_HEARTBEAT_ERROR_ACTIONS)
        outcome = SHARE_HEARTBEAT_ERROR_OUTCOMES.get(action)
        if outcome is not None:
            self._cause = (event.error_code, event.error_message)
            return self.decide(outcome, now_ms)
        rediscover = action is HeartbeatErrorAction.REDISCOVER_COORDINATOR
        self.heartbeats.on_failure(now_ms, reset_backoff=rediscover)
        if rediscover:
            return self._lose_coordinator(now_ms)
        if action is HeartbeatErrorAction.REPORT:
            return [error_report(event.error_code, event.error_message, fatal=False)]
        return []

    def _on_coordinator_lost(self, event: i.CoordinatorLost, now_ms: int) -> list[ShareCommand]:
        code = event.error_code
        self._cause = (code, event.reason or None)
        outcome = ShareOutcome.LOOKUP_FAILED
        if code is not None:
            action = heartbeat_error_action(code, SHARE_HEARTBEAT_ERROR_ACTIONS)
            outcome = SHARE_LOOKUP_ERROR_OUTCOMES.get(action, outcome)
        return self.decide(outcome, now_ms)

    def _lose_coordinator(self, now_ms: int) -> list[ShareCommand]:
        self.heartbeats.on_coordinator_lost()
        if self.heartbeats.should_request_coordinator(now_ms):
            return [FindCoordinator(self.config.group_id)]
        return []
