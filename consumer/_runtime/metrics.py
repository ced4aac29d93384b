"""The background loop's metrics recorder: the core's :class:`MemberMetrics` behind a lock.

The loop feeds it from the events it handles anyway (commands, inputs, state changes); the
application thread reads it through ``Consumer.metrics()``. The lock is taken once per event,
never per record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from consumer.member import MemberState
from consumer.member.metrics import MemberMetrics

__all__ = ["MetricsRecorder"]


class MetricsRecorder:
    """Thread-safe front of :class:`MemberMetrics` on the runtime's clock."""

    def __init__(self, clock_ms: Callable[[], int], state: MemberState) -> None:
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._metrics = MemberMetrics(clock_ms(), state)

    def commands_issued(self, commands: Iterable[object]) -> None:
        """The member issued these commands (in order)."""
        now_ms = self._clock_ms()
        with self._lock:
            for command in commands:
                self._metrics.command_issued(command, now_ms)

    def input_received(self, event: object, now_ms: int) -> None:
        """The loop is feeding ``event`` to the member at ``now_ms``."""
        with self._lock:
            self._metrics.input_received(event, now_ms)

    def state_changed(self, state: MemberState) -> None:
        """The member is now in ``state``."""
        now_ms = self._clock_ms()
        with self._lock:
            self._metrics.state_changed(state, now_ms)

    def snapshot(self, member_epoch: int) -> dict[str, float]:
        """Every metric now (see :data:`consumer.member.metrics.METRIC_NAMES`)."""
        now_ms = self._clock_ms()
        with self._lock:
            return self._metrics.snapshot(now_ms, member_epoch)
