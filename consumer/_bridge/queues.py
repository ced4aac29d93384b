"""The thread boundary: two queues between the application thread and the background loop.

``to_background`` carries application events (subscribe, commit, poll heartbeats, callback
completions, close) into the asyncio loop and wakes it (a routine poll report waits for the
loop's next turn instead: see :meth:`ToBackground.put_for_next_turn`); ``to_application`` carries
background
events (assignment changes, callbacks to run, errors, commit results) to the thread that calls
``poll()``. Checking an empty queue from ``poll()`` is a length check: O(1), no lock taken.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Wakeup(Protocol):
    """What wakes the background loop: ``set()``, called on the loop's thread (an
    ``asyncio.Event`` or :class:`consumer._runtime.loop_wakeup.LoopWakeup`)."""

    def set(self) -> None:
        """Wake the loop's sleeper."""


class ToBackground(Generic[T]):
    """Application -> background. ``put`` is thread-safe and wakes the loop's waiter."""

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: Wakeup | None = None
        self._listeners: list[Callable[[], None]] = []
        #: True from a waking ``put`` until the loop's next ``drain``.
        self._woken = False

    def attach(self, loop: asyncio.AbstractEventLoop, wakeup: Wakeup) -> None:
        """Bind to the background loop; called once from inside that loop."""
        self._loop = loop
        self._wakeup = wakeup

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from the putting thread) on every ``put``, before the item is
        queued."""
        self._listeners.append(listener)

    def __bool__(self) -> bool:
        return bool(self._items)

    @property
    def woken(self) -> bool:
        """True while an item put with :meth:`put` waits for the loop (background thread: an
        answer to it may be on its way, so nothing may be promised to the application)."""
        return self._woken

    def put(self, item: T) -> None:
        """Enqueue ``item`` (from any thread) and wake the background loop."""
        for listener in self._listeners:
            listener()
        self._items.append(item)
        self._woken = True
        loop, wakeup = self._loop, self._wakeup
        if loop is not None and wakeup is not None and not loop.is_closed():
            # The loop may close between the check and the call: then nobody needs waking.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wakeup.set)

    def put_for_next_turn(self, item: T) -> None:
        """Enqueue ``item`` (from any thread) without waking the loop or telling the listeners:
        for an item nothing waits an answer to, which the loop's next turn (at its next
        deadline, or the next :meth:`put`) takes soon enough. Order with :meth:`put` is kept."""
        self._items.append(item)

    def drain(self) -> list[T]:
        """Take every queued item, oldest first (background thread only)."""
        self._woken = False
        items: list[T] = []
        while self._items:
            items.append(self._items.popleft())
        return items


class ToApplication(Generic[T]):
    """Background -> application. Readers block on a condition, never on a sleep."""

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._condition = threading.Condition(threading.Lock())
        self._listeners: list[Callable[[], None]] = []

    def put(self, item: T) -> None:
        """Enqueue ``item`` and wake a thread blocked in :meth:`wait`."""
        with self._condition:
            self._items.append(item)
            self._condition.notify_all()
        for listener in self._listeners:
            listener()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from the background thread) after every ``put``."""
        self._listeners.append(listener)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def pop(self) -> T | None:
        """The oldest item, or ``None`` when empty (never blocks)."""
        items = self._items
        return items.popleft() if items else None

    def wait(self, timeout_s: float) -> bool:
        """Block until an item is queued or ``timeout_s`` passes; True if one is there."""
        with self._condition:
            if self._items:
                return True
            self._condition.wait(timeout_s)
            return bool(self._items)
