"""``ShareConsumer.metrics()``: the share member's heartbeat, rebalance, state and
acknowledgement metrics, counted by the background loop from what it does anyway.

Named as ``Consumer.metrics()`` names its counterparts (``consumer.member.metrics``), and as the
Java share consumer names the acknowledgement ones (``acknowledgement-send-*`` and
``acknowledgement-error-*`` of its share-fetch metrics); ``docs/howto/metrics.md`` lists them.
The loop feeds the recorder once per heartbeat, state change, assignment, acknowledgement outcome
and commit, never per record; the application reads it under the same lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping

from consumer.member.metrics import (
    HOUR_MS,
    RATE_WINDOW_MS,
    STATE_TIME_PREFIX,
    Latency,
    seconds_since,
)
from consumer.share.states import ShareState

__all__ = ["SHARE_METRIC_NAMES", "ShareMetrics"]

#: Every key of :meth:`ShareMetrics.snapshot` except the per-state times, with its meaning.
SHARE_METRIC_NAMES: dict[str, str] = {
    "rebalance-total": "rebalances completed (RECONCILING until STABLE)",
    "rebalance-rate-per-hour": "rebalances completed per hour (last hour)",
    "rebalance-latency-avg": "average ms from entering RECONCILING to STABLE",
    "rebalance-latency-max": "longest rebalance, ms",
    "last-rebalance-seconds-ago": "seconds since the last rebalance completed (-1: never)",
    "heartbeat-total": "ShareGroupHeartbeat responses received (with or without an error code)",
    "heartbeat-rate": "heartbeat responses per second (last 60 s)",
    "heartbeat-response-time-max": "longest wait for a heartbeat response, ms",
    "last-heartbeat-seconds-ago": "seconds since the last heartbeat was sent (-1: never)",
    "acknowledgement-send-total": "records whose acknowledgement got an outcome from a broker",
    "acknowledgement-send-rate": "such records per second (last 60 s)",
    "acknowledgement-error-total": "records whose acknowledgement failed",
    "acknowledgement-error-rate": "such records per second (last 60 s)",
    "commit-total": "commit_sync() / commit_async() round trips completed",
    "commit-rate": "commits per second (last 60 s)",
    "commit-latency-avg": "average wait for a commit's acknowledgement outcomes, ms",
    "commit-latency-max": "longest wait for a commit's acknowledgement outcomes, ms",
    "assigned-partitions": "partitions the member fetches now",
    "member-epoch": "the member epoch now (0: not in the group)",
    "state-transitions-total": "state changes",
}


class _Counter:
    """A total, and the counts added in the trailing window (for a per-second rate)."""

    def __init__(self) -> None:
        self.total = 0
        self._recent: deque[tuple[int, int]] = deque()  # (time ms, count), one per outcome
        self._recent_count = 0

    def add(self, count: int, now_ms: int) -> None:
        self.total += count
        self._recent.append((now_ms, count))
        self._recent_count += count

    def rate(self, now_ms: int, lived_ms: int) -> float:
        """Counts added in the last 60 s per second, over the part of them the member lived."""
        recent = self._recent
        while recent and recent[0][0] <= now_ms - RATE_WINDOW_MS:
            self._recent_count -= recent.popleft()[1]
        span_ms = min(RATE_WINDOW_MS, lived_ms)
        return self._recent_count * 1000 / span_ms if span_ms > 0 else 0.0


class ShareMetrics:
    """The share member's counters; fed by the background loop, read by ``metrics()``."""

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        now_ms = clock_ms()
        self._started_ms = now_ms
        self._seen_state = ShareState.UNSUBSCRIBED
        self._entered_ms = now_ms
        self._time_in_state_ms: dict[ShareState, int] = dict.fromkeys(ShareState, 0)
        self._transitions = 0
        self._rebalances = Latency(HOUR_MS)
        self._rebalance_started_ms: int | None = None
        self._last_rebalance_ms: int | None = None
        self._heartbeats = Latency(RATE_WINDOW_MS)
        self._last_heartbeat_sent_ms: int | None = None
        self._acknowledged = _Counter()
        self._ack_errors = _Counter()
        self._commits = Latency(RATE_WINDOW_MS)
        self._assigned = 0

    def now_ms(self) -> int:
        """The recorder's clock (the loop's), for timing a request."""
        return self._clock_ms()

    def heartbeat_sent(self) -> None:
        """A heartbeat request goes out now."""
        with self._lock:
            self._last_heartbeat_sent_ms = self._clock_ms()

    def heartbeat_answered(self, sent_ms: int) -> None:
        """A heartbeat sent at ``sent_ms`` got a response (with or without an error code)."""
        now_ms = self._clock_ms()
        with self._lock:
            self._heartbeats.record(now_ms - sent_ms, now_ms)

    def assignment_applied(self, partitions: int) -> None:
        """The data plane fetches ``partitions`` partitions now."""
        with self._lock:
            self._assigned = partitions

    def acknowledged(self, offsets: Mapping[tuple[str, int], frozenset[int]], failed: bool) -> None:
        """Acknowledgements of ``offsets`` got one outcome (``failed``: an error)."""
        count = sum(len(partition_offsets) for partition_offsets in offsets.values())
        now_ms = self._clock_ms()
        with self._lock:
            self._acknowledged.add(count, now_ms)
            if failed:
                self._ack_errors.add(count, now_ms)

    def commit_completed(self, started_ms: int) -> None:
        """A commit started at ``started_ms`` has its outcomes."""
        now_ms = self._clock_ms()
        with self._lock:
            self._commits.record(now_ms - started_ms, now_ms)

    def state_is(self, state: ShareState) -> None:
        """The member is in ``state`` now (the same state again changes nothing)."""
        if state is self._seen_state:
            return
        now_ms = self._clock_ms()
        with self._lock:
            self._time_in_state_ms[self._seen_state] += now_ms - self._entered_ms
            self._seen_state, self._entered_ms = state, now_ms
            self._transitions += 1
            if state is ShareState.RECONCILING and self._rebalance_started_ms is None:
                self._rebalance_started_ms = now_ms
            elif state is ShareState.STABLE and self._rebalance_started_ms is not None:
                self._rebalances.record(now_ms - self._rebalance_started_ms, now_ms)
                self._last_rebalance_ms, self._rebalance_started_ms = now_ms, None
            elif state in (ShareState.FENCED, ShareState.UNSUBSCRIBED, ShareState.FATAL):
                self._rebalance_started_ms = None
                self._assigned = 0

    def snapshot(self, member_epoch: int) -> dict[str, float]:
        """Every metric now: the keys of :data:`SHARE_METRIC_NAMES` and the state times."""
        now_ms = self._clock_ms()
        with self._lock:
            lived_ms = now_ms - self._started_ms
            rebalances, heartbeats, commits = self._rebalances, self._heartbeats, self._commits
            values: dict[str, float] = {
                "rebalance-total": rebalances.count,
                "rebalance-rate-per-hour": rebalances.rate(now_ms, lived_ms, HOUR_MS),
                "rebalance-latency-avg": rebalances.average_ms(),
                "rebalance-latency-max": rebalances.max_ms,
                "last-rebalance-seconds-ago": seconds_since(self._last_rebalance_ms, now_ms),
                "heartbeat-total": heartbeats.count,
                "heartbeat-rate": heartbeats.rate(now_ms, lived_ms, 1000),
                "heartbeat-response-time-max": heartbeats.max_ms,
                "last-heartbeat-seconds-ago": seconds_since(self._last_heartbeat_sent_ms, now_ms),
                "acknowledgement-send-total": self._acknowledged.total,
                "acknowledgement-send-rate": self._acknowledged.rate(now_ms, lived_ms),
                "acknowledgement-error-total": self._ack_errors.total,
                "acknowledgement-error-rate": self._ack_errors.rate(now_ms, lived_ms),
                "commit-total": commits.count,
                "commit-rate": commits.rate(now_ms, lived_ms, 1000),
                "commit-latency-avg": commits.average_ms(),
                "commit-latency-max": commits.max_ms,
                "assigned-partitions": self._assigned,
                "member-epoch": member_epoch,
                "state-transitions-total": self._transitions,
            }
            for state, spent_ms in self._time_in_state_ms.items():
                if state is self._seen_state:
                    spent_ms += now_ms - self._entered_ms
                values[STATE_TIME_PREFIX + state.name] = spent_ms
            return values
