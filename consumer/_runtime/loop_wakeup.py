"""When the background loop runs its next turn: at its next deadline or at a wake-up, whichever
is first.

The loop's turn is a plain function run as a loop callback, not a coroutine that sleeps: a
deadline costs one timer callback and a wake-up one ``call_soon``, with no task step, no future
and no ``asyncio.wait_for``/``asyncio.timeout`` around them (an idle member's loop spent most of
its CPU on that machinery). A heartbeat's answer may run the turn itself, right where it arrives
(see :meth:`LoopWakeup.run_now`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable

__all__ = ["LoopWakeup"]


class LoopWakeup:
    """Schedules the one turn function of the background loop.

    :meth:`set` is called from the loop's thread (an answer fed to the member, or
    ``call_soon_threadsafe`` from :class:`~consumer._bridge.queues.ToBackground`); a ``set``
    during a turn, after its :meth:`clear`, makes the next turn run right after it.
    """

    __slots__ = ("_closed", "_context", "_loop", "_soon", "_timer", "_turn")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        turn: Callable[[], None],
        context: contextvars.Context | None = None,
    ) -> None:
        self._loop = loop
        self._turn = turn
        #: Where the turn runs (the member's context, whichever thread woke it); None: the
        #: context current at each scheduling.
        self._context = context
        self._soon: asyncio.Handle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def is_set(self) -> bool:
        """Whether a turn is due right away (woken since the last :meth:`clear`)."""
        return self._soon is not None

    def set(self) -> None:
        """Run the turn soon (once, however often this is called before it runs)."""
        if self._soon is None and not self._closed:
            self._soon = self._loop.call_soon(self._woken, context=self._context)

    def clear(self) -> None:
        """A turn starts: forget the runs scheduled for it (timer and wake-up)."""
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def schedule(self, timeout_s: float | None) -> None:
        """At the end of a turn: run the next one after ``timeout_s`` (None: only when woken),
        or right away if woken during this turn."""
        if self._soon is not None or self._closed or timeout_s is None:
            return
        if timeout_s <= 0:
            self.set()
            return
        self._timer = self._loop.call_later(timeout_s, self._timer_fired, context=self._context)

    def close(self) -> None:
        """Run no more turns."""
        self.clear()
        self._closed = True

    def _woken(self) -> None:
        self._soon = None  # it runs now: nothing to cancel
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._turn()

    def _timer_fired(self) -> None:
        self._timer = None  # it runs now: nothing to cancel (an idle member's every turn)
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        self._turn()
