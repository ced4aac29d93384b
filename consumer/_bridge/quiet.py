"""How long ``poll()`` may wait inside librdkafka without keeping the background waiting.

librdkafka's poll cannot be woken from another thread, so ``poll()`` waits in slices and serves
the background's events between them. A fixed short slice wakes an idle consumer a hundred times
a second. The background loop knows better: while the member is STABLE with no request in flight
and nothing queued for it, nothing new can reach the application before the member's next timer
(a heartbeat, an auto-commit), since every change comes in a response or from a timer. It promises
that time here, and ``poll()`` waits up to it in one long slice; any request in flight (a
heartbeat's answer may carry a new assignment) ends the promise, and ``poll()`` goes back to short
slices. The application ends it too whenever it sends the background something, since the answer
may be for it (a commit's callback).

A long slice ends one short slice *after* the promised time rather than at it: the request that
timer sends is answered within a few milliseconds, and whatever the answer brings waits at most
one short slice, as it would in short slices anyway. The background has usually promised the next
quiet time by then, so an idle member's ``poll()`` wakes once per heartbeat, not three times.

One float, written by either thread and read by the application thread: stores and loads of an
attribute are atomic, so no lock is taken on the poll path.
"""

from __future__ import annotations

__all__ = ["QuietWindow"]


class QuietWindow:
    """Until when (``time.monotonic()`` seconds) the background has nothing for ``poll()``."""

    __slots__ = ("_until_s",)

    def __init__(self) -> None:
        self._until_s = 0.0

    @property
    def until_s(self) -> float:
        """The promised time; 0.0 when there is no promise."""
        return self._until_s

    def promise(self, until_s: float) -> None:
        """Nothing will reach the application before ``until_s`` (background thread)."""
        self._until_s = until_s

    def end(self) -> None:
        """Withdraw the promise: something may come at any moment (either thread)."""
        self._until_s = 0.0

    def slice_s(self, now_s: float, short_s: float, longest_s: float) -> float:
        """How long the next wait may be: up to one ``short_s`` past the promise (at most
        ``longest_s``), and never less than ``short_s``."""
        return min(longest_s, max(short_s, self._until_s + short_s - now_s))
