"""Waking the event loop from the member's background thread.

The bridge's queue to the application calls a listener after every ``put`` (on the background
thread); :class:`LoopWakeup` turns that into ``loop.call_soon_threadsafe``, which wakes every
coroutine of the consumer that waits in :meth:`LoopWakeup.wait`. No thread is started here.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["LoopWakeup"]


class LoopWakeup:
    """One consumer's wake-up: bound to the first event loop that uses it."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()

    def bind(self) -> None:
        """Bind to the running loop (the first call); refuse any other loop later."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("this AsyncConsumer belongs to another event loop")

    def notify_threadsafe(self) -> None:
        """From any thread: wake the waiters on the loop (nothing before the first ``bind``)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # The loop may close between the check and the call: then nobody waits.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.notify)

    def notify(self) -> None:
        """On the loop: wake every coroutine waiting now; later waiters wait for the next one."""
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout_s: float) -> None:
        """Wait for the next notification or ``timeout_s``, whichever comes first.

        The event is taken when the call starts, so a notification that arrives after the
        caller's last check (the loop only runs it once the caller awaits) is not missed.
        """
        event = self._event
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout_s)):
                await event.wait()
