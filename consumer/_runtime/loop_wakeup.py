"""How the background loop sleeps: until its next deadline or a wake-up, whichever is first.

``asyncio.wait_for(event.wait(), timeout)`` costs a task per turn (and, when the timeout fires,
two more turns of the event loop to cancel it): an idle member's loop spent most of its turns on
that machinery. :class:`LoopWakeup` waits on one plain future with one timer handle instead, so
a deadline costs one callback and a wake-up one ``set_result``.
"""

from __future__ import annotations

import asyncio

__all__ = ["LoopWakeup"]


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LoopWakeup:
    """A wake-up flag for the one coroutine that sleeps on it (the loop's ``_main``).

    :meth:`set` is called from the loop's thread (a task that fed an answer to the member, or
    ``call_soon_threadsafe`` from :class:`~consumer._bridge.queues.ToBackground`); a ``set`` that
    comes while nobody waits is remembered until the next :meth:`clear` or :meth:`wait`.
    """

    __slots__ = ("_is_set", "_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._is_set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        """Wake the sleeper now (or make its next :meth:`wait` return at once)."""
        self._is_set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        """Forget a wake-up already seen (the start of a turn, before looking at the inputs)."""
        self._is_set = False

    async def wait(self, timeout_s: float | None) -> None:
        """Return after ``timeout_s`` (None: no limit) or at the next :meth:`set`, whichever
        comes first; at once (after yielding to the loop) if set since the last :meth:`clear`."""
        if self._is_set or (timeout_s is not None and timeout_s <= 0):
            await asyncio.sleep(0)  # let the loop's other tasks run before the next turn
            return
        waiter = self._loop.create_future()
        self._waiter = waiter
        timer = None if timeout_s is None else self._loop.call_later(timeout_s, _resolve, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
