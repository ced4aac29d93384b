"""Rebalance, heartbeat and commit metrics of one member, counted from what it already does.

Sans-I/O like the rest of the core: :class:`MemberMetrics` is told about the commands the member
issued, the inputs it was fed and its state changes, each with the time in milliseconds; it reads
no clock. The runtime calls it from the events it handles anyway (a heartbeat, a commit, a state
change), never per record, so collecting costs nothing on the data path.

Names follow the Java consumer where it has a counterpart (its ``ConsumerRebalanceMetricsManager``,
``HeartbeatMetricsManager`` and ``OffsetCommitMetricsManager``, metric group
``consumer-coordinator-metrics``); the others are named in the same style. Two differences from
Java (``docs/howto/metrics.md``): averages and maxima cover the member's whole life (Java's cover
its last two 30 s samples, so a rebalance an hour ago is invisible there), and rates are counts
over a trailing window (60 s for heartbeats and commits, one hour for rebalances) divided by the
part of that window the member has lived.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from consumer.member.commands import (
    ApplyAssignment,
    CommitOffsets,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    SendHeartbeat,
)
from consumer.member.inputs import (
    CommitCompleted,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
)
from consumer.member.states import MemberState

__all__ = ["METRIC_NAMES", "MemberMetrics", "STATE_TIME_PREFIX"]

#: Trailing window of ``heartbeat-rate`` and ``commit-rate`` (per second).
RATE_WINDOW_MS = 60_000
#: Trailing window of ``rebalance-rate-per-hour`` and ``failed-rebalance-rate-per-hour``.
HOUR_MS = 3_600_000
#: ``time-in-state-ms.<STATE>``: milliseconds spent in each state, the current stay included.
STATE_TIME_PREFIX = "time-in-state-ms."

#: States entered when a rebalance of this member fails (Java: FENCED, FATAL, leaving).
_REBALANCE_FAILS_IN = frozenset(
    {
        MemberState.FENCED,
        MemberState.STALE,
        MemberState.FATAL,
        MemberState.UNSUBSCRIBING,
        MemberState.UNSUBSCRIBED,
    }
)

#: Every key of :meth:`MemberMetrics.snapshot` except the per-state times, with its meaning.
METRIC_NAMES: dict[str, str] = {
    "rebalance-total": "rebalances completed (reconciling a new target until STABLE)",
    "rebalance-rate-per-hour": "rebalances completed per hour (last hour)",
    "rebalance-latency-avg": "average ms from entering RECONCILE_ASSIGNMENT to STABLE",
    "rebalance-latency-max": "longest rebalance, ms",
    "rebalance-latency-total": "ms spent in completed rebalances",
    "failed-rebalance-total": "rebalances ended by fencing, staleness, a fatal error or leaving",
    "failed-rebalance-rate-per-hour": "failed rebalances per hour (last hour)",
    "last-rebalance-seconds-ago": "seconds since the last rebalance completed (-1: never)",
    "heartbeat-total": "heartbeat responses received (with or without an error code)",
    "heartbeat-rate": "heartbeat responses per second (last 60 s)",
    "heartbeat-response-time-max": "longest wait for a heartbeat response, ms",
    "last-heartbeat-seconds-ago": "seconds since the last heartbeat was sent (-1: never)",
    "commit-total": "OffsetCommit responses received",
    "commit-rate": "OffsetCommit responses per second (last 60 s)",
    "commit-latency-avg": "average wait for an OffsetCommit response, ms",
    "commit-latency-max": "longest wait for an OffsetCommit response, ms",
    "partitions-assigned-total": "partitions handed to on_assign",
    "partitions-revoked-total": "partitions handed to on_revoke",
    "partitions-lost-total": "partitions handed to on_lost",
    "assigned-partitions": "partitions owned now",
    "member-epoch": "the member epoch now (0: not in the group)",
    "state-transitions-total": "state changes",
}


@dataclass
class Latency:
    """Count, sum and maximum of durations in ms, plus when each was recorded (for the rate)."""

    window_ms: int
    count: int = 0
    total_ms: int = 0
    max_ms: int = 0
    recent_ms: deque[int] = field(default_factory=deque)

    def record(self, duration_ms: int, now_ms: int) -> None:
        self.count += 1
        self.total_ms += duration_ms
        self.max_ms = max(self.max_ms, duration_ms)
        self.recent_ms.append(now_ms)
        self._expire(now_ms)

    def _expire(self, now_ms: int) -> None:
        recent = self.recent_ms
        while recent and recent[0] <= now_ms - self.window_ms:
            recent.popleft()

    def average_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0

    def rate(self, now_ms: int, lived_ms: int, per_ms: int) -> float:
        """Events in the trailing window per ``per_ms``, over the part of it the member lived."""
        self._expire(now_ms)
        span_ms = min(self.window_ms, lived_ms)
        return len(self.recent_ms) * per_ms / span_ms if span_ms > 0 else 0.0


def seconds_since(then_ms: int | None, now_ms: int) -> float:
    """Seconds from ``then_ms`` to ``now_ms``; -1 when ``then_ms`` is None (never)."""
    return -1.0 if then_ms is None else (now_ms - then_ms) / 1000


class MemberMetrics:
    """Counters of one member, fed by the runtime; :meth:`snapshot` reads them as a dict.

    Not thread-safe: the runtime serialises the calls (the loop feeds, the application reads).
    """

    def __init__(self, now_ms: int, state: MemberState = MemberState.UNSUBSCRIBED) -> None:
        self._started_ms = now_ms
        self._seen_state = state
        self._entered_ms = now_ms
        self._time_in_state_ms: dict[MemberState, int] = dict.fromkeys(MemberState, 0)
        self._transitions = 0
        self._rebalances = Latency(HOUR_MS)
        self._failed_rebalances = Latency(HOUR_MS)
        self._rebalance_started_ms: int | None = None
        self._last_rebalance_ms: int | None = None
        self._heartbeats = Latency(RATE_WINDOW_MS)
        self._heartbeats_sent_ms: dict[int, int] = {}
        self._last_heartbeat_sent_ms: int | None = None
        self._commits = Latency(RATE_WINDOW_MS)
        self._commits_sent_ms: dict[int, int] = {}
        self._partitions_assigned = 0
        self._partitions_revoked = 0
        self._partitions_lost = 0
        self._owned = 0

    # --- feeding --------------------------------------------------------------------------------

    def command_issued(self, command: object, now_ms: int) -> None:
        """The member issued ``command`` (the runtime is about to execute it)."""
        match command:
            case SendHeartbeat():
                self._heartbeats_sent_ms[command.request_id] = now_ms
                self._last_heartbeat_sent_ms = now_ms
            case CommitOffsets():
                self._commits_sent_ms[command.request_id] = now_ms
            case ApplyAssignment():
                self._owned = len(command.assigned)
            case InvokeOnAssign():
                self._partitions_assigned += len(command.partitions)
            case InvokeOnRevoke():
                self._partitions_revoked += len(command.partitions)
            case InvokeOnLost():
                self._partitions_lost += len(command.partitions)
                self._owned = 0

    def input_received(self, event: object, now_ms: int) -> None:
        """The runtime is about to feed ``event`` to the member."""
        match event:
            case HeartbeatSucceeded() | HeartbeatFailed():
                sent_ms = self._heartbeats_sent_ms.pop(event.request_id, None)
                if sent_ms is not None:
                    self._heartbeats.record(now_ms - sent_ms, now_ms)
            case HeartbeatTransportFailed():
                self._heartbeats_sent_ms.pop(event.request_id, None)  # no response: no latency
            case CommitCompleted():
                sent_ms = self._commits_sent_ms.pop(event.request_id, None)
                if sent_ms is not None:
                    self._commits.record(now_ms - sent_ms, now_ms)

    def state_changed(self, state: MemberState, now_ms: int) -> None:
        """The member moved to ``state`` (calls with the current state are ignored)."""
        previous = self._seen_state
        if state is previous:
            return
        self._time_in_state_ms[previous] += now_ms - self._entered_ms
        self._seen_state, self._entered_ms = state, now_ms
        self._transitions += 1
        started_ms = self._rebalance_started_ms
        if state is MemberState.RECONCILE_ASSIGNMENT and started_ms is None:
            self._rebalance_started_ms = now_ms
        elif state is MemberState.STABLE and started_ms is not None:
            self._rebalances.record(now_ms - started_ms, now_ms)
            self._last_rebalance_ms, self._rebalance_started_ms = now_ms, None
        elif state in _REBALANCE_FAILS_IN and started_ms is not None:
            self._failed_rebalances.record(now_ms - started_ms, now_ms)
            self._rebalance_started_ms = None
        if state in (MemberState.FENCED, MemberState.UNSUBSCRIBED, MemberState.FATAL):
            self._heartbeats_sent_ms.clear()  # answers to those no longer arrive or count

    # --- reading --------------------------------------------------------------------------------

    def snapshot(self, now_ms: int, member_epoch: int) -> dict[str, float]:
        """Every metric at ``now_ms``: the keys of :data:`METRIC_NAMES` and the state times."""
        lived_ms = now_ms - self._started_ms
        rebalances, failed = self._rebalances, self._failed_rebalances
        heartbeats, commits = self._heartbeats, self._commits
        values: dict[str, float] = {
            "rebalance-total": rebalances.count,
            "rebalance-rate-per-hour": rebalances.rate(now_ms, lived_ms, HOUR_MS),
            "rebalance-latency-avg": rebalances.average_ms(),
            "rebalance-latency-max": rebalances.max_ms,
            "rebalance-latency-total": rebalances.total_ms,
            "failed-rebalance-total": failed.count,
            "failed-rebalance-rate-per-hour": failed.rate(now_ms, lived_ms, HOUR_MS),
            "last-rebalance-seconds-ago": seconds_since(self._last_rebalance_ms, now_ms),
            "heartbeat-total": heartbeats.count,
            "heartbeat-rate": heartbeats.rate(now_ms, lived_ms, 1000),
            "heartbeat-response-time-max": heartbeats.max_ms,
            "last-heartbeat-seconds-ago": seconds_since(self._last_heartbeat_sent_ms, now_ms),
            "commit-total": commits.count,
            "commit-rate": commits.rate(now_ms, lived_ms, 1000),
            "commit-latency-avg": commits.average_ms(),
            "commit-latency-max": commits.max_ms,
            "partitions-assigned-total": self._partitions_assigned,
            "partitions-revoked-total": self._partitions_revoked,
            "partitions-lost-total": self._partitions_lost,
            "assigned-partitions": self._owned,
            "member-epoch": member_epoch,
            "state-transitions-total": self._transitions,
        }
        for state, spent_ms in self._time_in_state_ms.items():
            if state is self._seen_state:
                spent_ms += now_ms - self._entered_ms
            values[STATE_TIME_PREFIX + state.name] = spent_ms
        return values
