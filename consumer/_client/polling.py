"""``poll()``'s liveness signal to the member (application thread).

Every ``poll()`` / ``consume()`` call stamps the bridge's :class:`~consumer._bridge.last_poll.
LastPoll` cell, which the background loop reads before running the member's timers: the poll
timer (``max.poll.interval.ms``) counts from the application's last call. ``AppPolled`` events,
which also carry the consumed offsets under auto-commit, are throttled to one per report
interval (sent at once while the member is unsubscribed or stale).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer._bridge.messages import AppEvent
from consumer._bridge.queues import ToBackground
from consumer.config import ConsumerConfig
from consumer.member import AppPolled, MemberState, TopicPartition

__all__ = [
    "FAST_POLL_BUDGET",
    "POLL_SLICE_S",
    "REBALANCE_POLL_SLICE_S",
    "PollReporter",
    "deadline_s",
    "poll_slice_s",
]

#: How long one wait inside poll() may block before the background's events are checked again.
#: librdkafka's poll cannot be woken from another thread, so this bounds how long an assignment
#: change waits for the application thread: 10 ms gave an ack p99 of 13 ms (50 ms: 88 ms) for
#: 0.55 % of a core per idle member (docs/benchmarks.md, what-if run).
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
#: Records the poll() fast path may return before the full path runs again.
FAST_POLL_BUDGET = 256


def deadline_s(timeout: float | None) -> float:
    """The ``time.monotonic()`` deadline of a ``poll(timeout)`` (``inf`` for None or < 0)."""
    if timeout is None or timeout < 0:
        return math.inf
    return time.monotonic() + timeout


def poll_slice_s(state: MemberState | None) -> float:
    """How long one wait inside ``poll()`` may block in member state ``state`` (None: no member)."""
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
        if now_ms - self.last_report_ms >= self._interval_ms or state in _REPORT_AT_ONCE:
            self.last_report_ms = now_ms
            offsets = consumed() if self._auto_commit else None
            self._to_background.put(AppPolled(consumed_offsets=offsets or None))
