"""``poll()``'s liveness signal to the member, and how long each of its waits may be
(application thread).

Every ``poll()`` / ``consume()`` call stamps the bridge's :class:`~consumer._bridge.last_poll.
LastPoll` cell, which the background loop reads before running the member's timers: the poll
timer (``max.poll.interval.ms``) counts from the application's last call. ``AppPolled`` events,
which also carry the consumed offsets under auto-commit, are throttled to one per report
interval and wait for the loop's next turn without waking it (sent at once, waking it, while the
member is unsubscribed or stale: it waits for a poll to rejoin).

librdkafka's poll cannot be woken from another thread, so ``poll()`` waits in slices and serves
the background's events between them (:class:`PollSlices`): short ones while anything may come
from the background, up to the end of the background's promise of quiet
(:mod:`consumer._bridge.quiet`) while the member is idle and STABLE.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer._bridge.messages import AppEvent
from consumer._bridge.queues import ToBackground
from consumer._bridge.quiet import QuietWindow
from consumer.config import ConsumerConfig
from consumer.member import AppPolled, MemberState, TopicPartition

__all__ = [
    "FAST_CONSUME_WINDOW_S",
    "FAST_POLL_BUDGET",
    "MIN_WAIT_S",
    "POLL_SLICE_S",
    "REBALANCE_POLL_SLICE_S",
    "PollReporter",
    "PollSlices",
    "deadline_s",
    "whole_ms",
]

#: The short slice: how long an assignment change may wait for the application thread while a
#: heartbeat is in flight (10 ms gave an ack p99 of 13 ms; 50 ms: 88 ms; docs/benchmarks.md).
POLL_SLICE_S = 0.01
#: Shorter slice while a rebalance is in progress, so callbacks and acks are not delayed.
REBALANCE_POLL_SLICE_S = 0.005
_REBALANCING = frozenset(
    {
        MemberState.JOINING,
        MemberState.RECONCILE_ASSIGNMENT,
        MemberState.ACK_ASSIGNMENT,
        MemberState.UNSUBSCRIBING,
        MemberState.FENCED,
    }
)
#: The longest slice while the background promises quiet (or runs no member): an idle STABLE
#: member wakes about once per heartbeat, and at least once a second (a manually assigned
#: partition's auto-commit runs between slices).
_QUIET_POLL_SLICE_MAX_S = 1.0
#: librdkafka counts waits in whole milliseconds: a wait shorter than this returns at once, so
#: ``poll()`` stops once less than this is left of its timeout instead of spinning through it.
MIN_WAIT_S = 0.001
#: Records the poll() fast path may return before the full path runs again.
FAST_POLL_BUDGET = 256
#: How long consume()'s fast path may return full batches before the full path runs again:
#: it bounds how stale the liveness stamp and the consumed offsets (auto-commit) can get while
#: batches flow (each full turn costs about 10 µs; at a million records/s in batches of 500
#: this window holds about 200 batches).
FAST_CONSUME_WINDOW_S = 0.1


def deadline_s(timeout: float | None) -> float:
    """The ``time.monotonic()`` deadline of a ``poll(timeout)`` (``inf`` for None or < 0)."""
    if timeout is None or timeout < 0:
        return math.inf
    return time.monotonic() + timeout


def whole_ms(wait_s: float) -> float:
    """``wait_s`` rounded up to whole milliseconds: librdkafka truncates a wait to whole
    milliseconds, so the last wait of a ``poll(timeout)`` asks for this and ends at the deadline,
    not a fraction of a millisecond before it (which took one more turn to run out)."""
    return math.ceil(wait_s * 1000) / 1000


class PollSlices:
    """How long one wait inside ``poll()`` may block before the background is served again."""

    def __init__(self, config: ConsumerConfig, quiet: QuietWindow) -> None:
        self._quiet = quiet
        # The poll timer counts from the last slice's start: keep several slices per interval.
        self._longest_s = min(_QUIET_POLL_SLICE_MAX_S, config.max_poll_interval_ms / 4000)

    def slice_s(self, state: MemberState | None) -> float:
        """The next slice for a member in ``state`` (None: no background running, so nothing
        can come from it: manual assignment, or before ``subscribe()``)."""
        if state is None:
            return self._longest_s
        if state in _REBALANCING:
            return REBALANCE_POLL_SLICE_S
        return self._quiet.slice_s(time.monotonic(), POLL_SLICE_S, self._longest_s)

    @staticmethod
    def short_slice_s(state: MemberState | None) -> float:
        """The slice without the promise of quiet: for a poller that cannot block in
        librdkafka, so that a record waits no longer than this (``consumer.aio``)."""
        return REBALANCE_POLL_SLICE_S if state in _REBALANCING else POLL_SLICE_S


#: States in which every poll is reported at once (the member waits for it to rejoin).
_REPORT_AT_ONCE = (MemberState.UNSUBSCRIBED, MemberState.STALE)


class PollReporter:
    """Stamps each poll and reports polls (throttled) to the member."""

    def __init__(self, config: ConsumerConfig, to_background: ToBackground[AppEvent]) -> None:
        self._auto_commit = config.enable_auto_commit
        self._to_background = to_background
        #: The application's last poll() call, read by the background loop.
        self.last_poll = LastPoll()
        #: When the member was last sent an ``AppPolled`` (``monotonic_ms`` time).
        self.last_report_ms = 0
        self._interval_ms = max(
            10,
            min(
                1000,
                config.auto_commit_interval_ms or 1000,
                config.max_poll_interval_ms // 4,
            ),
        )

    def signal(
        self,
        state: MemberState,
        consumed: Callable[[], dict[TopicPartition, int]],
    ) -> None:
        """Record a poll now; report it (with ``consumed()`` under auto-commit) when due."""
        now_ms = monotonic_ms()
        self.last_poll.stamp(now_ms)
        at_once = state in _REPORT_AT_ONCE
        if now_ms - self.last_report_ms >= self._interval_ms or at_once:
            self.last_report_ms = now_ms
            offsets = consumed() if self._auto_commit else None
            report = AppPolled(consumed_offsets=offsets or None)
            if at_once:  # the member waits for it to rejoin
                self._to_background.put(report)
            else:
                # Nothing waits for it: the loop reads the LastPoll stamp on every turn, and
                # takes the consumed offsets on its next one, before any timer (auto-commit)
                # could use them. Waking the loop once a second cost an idle member as much as
                # its heartbeats.
                self._to_background.put_for_next_turn(report)
