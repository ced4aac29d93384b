"""A manual clock for driving sans-I/O members in tests: time moves only when told to."""

from __future__ import annotations


class ManualClock:
    """Milliseconds that advance only through :meth:`advance` / :meth:`advance_to`."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    @property
    def now_ms(self) -> int:
        """The current time in milliseconds."""
        return self._now_ms

    def advance(self, delta_ms: int) -> int:
        """Move forward by ``delta_ms`` (>= 0); returns the new time."""
        if delta_ms < 0:
            raise ValueError("a clock cannot go backwards")
        self._now_ms += delta_ms
        return self._now_ms

    def advance_to(self, when_ms: int) -> int:
        """Move forward to ``when_ms`` if it is later than now; returns the new time."""
        self._now_ms = max(self._now_ms, when_ms)
        return self._now_ms
