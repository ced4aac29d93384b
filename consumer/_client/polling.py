"""``poll()``'s liveness signal to the member (application thread).

Every ``poll()`` / ``consume()`` call stamps the bridge's :class:`~consumer._bridge.last_poll.
LastPoll` cell, which the background loop reads before running the member's timers: the poll
timer (``max.poll.interval.ms``) counts from the application's last call. ``AppPolled`` events,
which also carry the consumed offsets under auto-commit, are throttled to one per report
interval (sent at once while the member is unsubscribed or stale).
"""

from __future__ import annotations

from collections.abc import Callable

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer._bridge.messages import AppEvent
from consumer._bridge.queues import ToBackground
from consumer.config import ConsumerConfig
from consumer.member import AppPolled, MemberState, TopicPartition

__all__ = ["PollReporter"]

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
