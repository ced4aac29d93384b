"""The Member: one consumer group member driven by inputs and time, emitting commands.

Driving contract (sans-I/O): feed every input with :meth:`Member.handle`, then call
:meth:`Member.poll` (after each batch of inputs, and again at the deadline it returns). Both return
commands to execute in order. Nothing here reads a clock, sleeps, locks or opens a socket; one
thread owns a member.

The member feeds each input to its managers, turns what they report into an
:class:`~consumer.member.rules.Outcome`, and lets :data:`~consumer.member.rules.RULES` decide the
next state and the effects (:mod:`consumer.member.effects` runs them).
"""

from __future__ import annotations

import random

from consumer.member import inputs as i
from consumer.member.commands import Command, CommitReason, FindCoordinator
from consumer.member.config import MemberConfig
from consumer.member.effects import MemberEffects, TransitionObserver, error_report
from consumer.member.errors import MemberStateError
from consumer.member.errors_table import HeartbeatErrorAction, heartbeat_error_action
from consumer.member.inputs import Input
from consumer.member.rules import HEARTBEAT_ERROR_OUTCOMES, LOOKUP_ERROR_OUTCOMES, Outcome
from consumer.member.states import Heartbeats


class Member(MemberEffects):
    """A KIP-848 consumer group member (client side), as a sans-I/O state machine.

    Args:
        config: the member's settings.
        random: the random source for the member id and backoff jitter. Use
            ``random.SystemRandom()`` in production; a seeded ``random.Random`` in tests.
        on_transition: optional observer told ``(previous_state, rule)`` each time a row of the
            rules table fires (timelines, metrics, tests).
    """

    def __init__(
        self,
        config: MemberConfig,
        random: random.Random,
        on_transition: TransitionObserver | None = None,
    ) -> None:
        super().__init__(config, random, on_transition)

    # --- driving ----------------------------------------------------------------------------

    def handle(self, event: Input, now_ms: int) -> list[Command]:
        """Feed one input; returns the commands it causes. Call :meth:`poll` afterwards.

        Raises:
            FatalMemberError: subscribing or committing on a member in FATAL state.
            MemberStateError: an input that is not allowed (for example subscribing after close).
        """
        if self._shut_down:
            if isinstance(event, i.Subscribed | i.CommitRequested):
                raise MemberStateError("the member is shut down")
            return []
        commands = self._dispatch(event, now_ms)
        return commands + self._reconcile(now_ms)

    def _dispatch(self, event: Input, now_ms: int) -> list[Command]:  # noqa: C901
        a = self.assignment
        match event:  # the idle member's every input (a heartbeat answer) is matched first
            case i.HeartbeatSucceeded():
                return self._on_heartbeat_succeeded(event, now_ms)
            case i.Subscribed():
                return self._on_subscribed(event, now_ms)
            case i.Unsubscribed():
                self._subscribe(None, None)
                return self.decide(Outcome.UNSUBSCRIBE_REQUESTED, now_ms)
            case i.AppPolled():
                self._on_app_polled(event, now_ms)
                return self.decide(Outcome.APP_POLLED, now_ms)
            case i.ConsumedOffsetsReported():
                self.commits.record_consumed(event.offsets)
            case i.CommitRequested():
                return self._on_commit_requested(event, now_ms)
            case i.PollIntervalExpired():
                return self.decide(Outcome.POLL_INTERVAL_EXPIRED, now_ms)
            case i.CloseRequested():
                self._closing = event.option
                self._join_pending = False
                return self.decide(Outcome.CLOSE_REQUESTED, now_ms)
            case i.FetchingStopped():
                self.commits.record_consumed(event.consumed_offsets)
                return self.follow(a.on_fetching_stopped(event, now_ms), now_ms)
            case i.RevocationCompleted():
                return self.follow(a.on_revocation_completed(event, now_ms), now_ms)
            case i.CallbackCompleted():
                return self.follow(a.on_callback_completed(event, now_ms), now_ms)
            case i.AssignmentApplied():
                return self.follow(a.on_assignment_applied(event, now_ms), now_ms)
            case i.StartOffsetsListed():
                return self.follow(a.on_start_offsets_listed(event), now_ms)
            case i.HeartbeatFailed():
                return self._on_heartbeat_failed(event, now_ms)
            case i.HeartbeatTransportFailed():
                if self.heartbeats.take_answer(event.request_id):
                    self.heartbeats.on_failure(now_ms, reset_backoff=False)
                    return self._lose_coordinator(now_ms)
            case i.CoordinatorChanged():
                self.heartbeats.on_coordinator_changed()
            case i.CoordinatorLost():
                return self._on_coordinator_lost(event, now_ms)
            case i.MetadataResolved():
                a.learn_names(event.topic_names)
            case i.CommitCompleted():
                job_id, wants_heartbeat, commands = self.commits.on_commit_completed(event, now_ms)
                if wants_heartbeat:
                    self.heartbeats.expedite()
                if job_id is None:
                    return commands
                return commands + self.follow(a.on_commit_finished(job_id, now_ms), now_ms)
            case i.CommittedOffsetsFetched():
                outcome, commands = self.commits.on_fetch_completed(event, now_ms)
                if isinstance(outcome, tuple):
                    step = a.on_offsets_fetched(*outcome)
                    return commands + self.follow(step, now_ms)
                if outcome:
                    self.heartbeats.expedite()
                return commands
            case _:
                raise MemberStateError(f"unknown input {event!r}")
        return []

    def poll(self, now_ms: int) -> tuple[list[Command], int | None]:
        """Run timers: returns the commands due now and the next deadline (None: wait for input)."""
        if self._shut_down:
            return [], None
        commands: list[Command] = []
        last_poll_ms = self._last_poll_ms
        if last_poll_ms is not None and now_ms - last_poll_ms >= self.config.max_poll_interval_ms:
            commands += self.decide(Outcome.POLL_INTERVAL_EXPIRED, now_ms)
        finished, more = self.commits.poll(now_ms)
        commands += more
        for job_id in finished:
            commands += self.follow(self.assignment.on_commit_finished(job_id, now_ms), now_ms)
        commands += self.follow(self.assignment.poll(now_ms), now_ms)
        commands += self._reconcile(now_ms)
        info = self.info
        if info.in_group and self._epoch > 0:
            commands += self.commits.auto_commit(now_ms, lambda: self.owned_partitions)
        heartbeats, sent = self.heartbeats.poll(now_ms, info, self)
        commands += heartbeats
        if sent:
            commands += self.decide(Outcome.HEARTBEAT_SENT, now_ms) + self._reconcile(now_ms)
        return commands, self._next_deadline_ms()

    def _reconcile(self, now_ms: int) -> list[Command]:
        """In a state that reconciles, start the next round when none runs."""
        if not self.info.reconciles:
            return []
        return self.follow(self.assignment.start_reconcile(now_ms), now_ms)

    # --- inputs -----------------------------------------------------------------------------

    def _on_subscribed(self, event: i.Subscribed, now_ms: int) -> list[Command]:
        if self._fatal_error is not None:
            raise self._fatal_error
        if self._closing is not None:
            raise MemberStateError("cannot subscribe: the member is closing")
        if event.topic_names is not None and not event.topic_names:
            return self._dispatch(i.Unsubscribed(), now_ms)
        names = tuple(sorted(set(event.topic_names))) if event.topic_names else None
        self._subscribe(names, event.topic_regex)
        return self.decide(Outcome.SUBSCRIBED, now_ms)

    def _on_app_polled(self, event: i.AppPolled, now_ms: int) -> None:
        if event.consumed_offsets:
            self.commits.record_consumed(event.consumed_offsets)
        polled_ms = now_ms if event.polled_at_ms is None else min(now_ms, event.polled_at_ms)
        if self._last_poll_ms is None or polled_ms > self._last_poll_ms:
            self._last_poll_ms = polled_ms

    def _on_commit_requested(self, event: i.CommitRequested, now_ms: int) -> list[Command]:
        if self._fatal_error is not None:
            raise self._fatal_error
        offsets = event.offsets
        if offsets is None:
            offsets = self.commits.uncommitted(self.owned_partitions)
        deadline_ms = None if event.timeout_ms is None else now_ms + event.timeout_ms
        return self.commits.start_commit(
            CommitReason.USER, offsets, now_ms, deadline_ms=deadline_ms, token=event.token
        )[1]

    def _on_heartbeat_succeeded(self, event: i.HeartbeatSucceeded, now_ms: int) -> list[Command]:
        if not self.heartbeats.take_answer(event.request_id):
            return []
        self.heartbeats.on_success(event.heartbeat_interval_ms, now_ms)
        # A negative or lower epoch is a stale answer (KAFKA-19335): ignore it entirely.
        if event.member_epoch < 0 or event.member_epoch < self._epoch:
            return []
        commands: list[Command] = []
        if event.member_epoch != self._epoch:
            self._epoch = event.member_epoch
            commands += self.commits.on_epoch_changed()
        if not self.info.in_group:
            return commands
        if event.assignment is not None:
            self.assignment.set_target(event.assignment)
        return commands + self.decide(Outcome.TARGET_RECEIVED, now_ms)

    def _on_heartbeat_failed(self, event: i.HeartbeatFailed, now_ms: int) -> list[Command]:
        if not self.heartbeats.take_answer(event.request_id):
            return []
        action = heartbeat_error_action(event.error_code)
        outcome = HEARTBEAT_ERROR_OUTCOMES.get(action)
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

    def _on_coordinator_lost(self, event: i.CoordinatorLost, now_ms: int) -> list[Command]:
        """A lookup failed or the coordinator connection is gone: fail, or look up after backoff."""
        code = event.error_code
        self._cause = (code, event.reason or None)
        outcome = Outcome.LOOKUP_FAILED
        if code is not None:
            outcome = LOOKUP_ERROR_OUTCOMES.get(heartbeat_error_action(code), outcome)
        if self.heartbeats.lookup_made_silently and self.info.heartbeats is not Heartbeats.NONE:
            outcome = Outcome.EARLY_LOOKUP_FAILED
        self.heartbeats.lookup_made_silently = False
        return self.decide(outcome, now_ms)

    def _lose_coordinator(self, now_ms: int) -> list[Command]:
        self.heartbeats.on_coordinator_lost()
        if self.heartbeats.should_request_coordinator(now_ms):
            return [FindCoordinator(self.config.group_id)]
        return []
