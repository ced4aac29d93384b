"""When the application last called ``poll()``: written by its thread, read by the loop."""

from __future__ import annotations

import time

__all__ = ["LastPoll", "monotonic_ms"]


def monotonic_ms() -> int:
    """Milliseconds of a monotonic clock: the member's notion of now, and the stamps' clock."""
    return time.monotonic_ns() // 1_000_000


class LastPoll:
    """A one-value cell holding the time (milliseconds of the runtime's monotonic clock) of the
    application's latest ``poll()`` / ``consume()`` call.

    The application thread stamps it on every call; the background loop reads it before running
    the member's timers, so ``max.poll.interval.ms`` counts from the real last call rather than
    from the last (throttled) ``AppPolled`` report. One writer, one reader, one ``int``
    attribute: a store and a load of it are atomic, so no lock is taken on the poll path.
    """

    __slots__ = ("_polled_ms",)

    def __init__(self) -> None:
        self._polled_ms = 0

    def stamp(self, now_ms: int) -> None:
        """Record a ``poll()`` call at ``now_ms`` (application thread)."""
        self._polled_ms = now_ms

    @property
    def polled_ms(self) -> int:
        """The latest stamp, 0 before the first call (any thread)."""
        return self._polled_ms
