"""One event loop thread for every group member of the process.

Each member's runtime (:class:`~consumer._runtime.background.BackgroundRuntime`) is a task on
this loop, not a thread of its own: fifty members in one process are one thread that wakes for
whichever member is due, not fifty threads handing the GIL to each other at every socket read,
timer and cross-thread wake-up (``benchmarks/analysis.md``, session 13). librdkafka keeps its
threads per client instance, but they are C threads outside the GIL; Java's consumer has one
background thread per instance, and a JVM runs them in parallel. A Python process cannot, so
the members share one.

The thread starts with the first member and ends with the last (:meth:`LoopThread.release`), so
a process that closes every consumer has no thread of ours left; a member that starts after that
gets a new thread. Each member runs in its own ``contextvars`` context: the tasks it creates
belong to it (:func:`owned_tasks`), so its end cancels what it left, as ``asyncio.run`` did for
a thread of its own. A forked child (Spark's Python workers) starts with no loop thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any

__all__ = ["LoopThread", "TaskOwner", "acquire_loop", "owned_tasks"]

#: The name of the thread that runs every member's loop.
THREAD_NAME = "kafka-group-member"


class TaskOwner:
    """The tasks created in one member's context (see :func:`owned_tasks`)."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()


_OWNER: contextvars.ContextVar[TaskOwner | None] = contextvars.ContextVar(
    "consumer_task_owner", default=None
)


def owned_tasks(context: contextvars.Context) -> TaskOwner:
    """Make every task created in ``context`` (and in contexts copied from it) belong to one
    :class:`TaskOwner`, and return it."""
    owner = TaskOwner()
    context.run(_OWNER.set, owner)
    return owner


def _task_factory(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    context: contextvars.Context | None = None,
) -> asyncio.Task[Any]:
    task = asyncio.Task(coro, loop=loop, context=context)
    owner = context.get(_OWNER) if context is not None else _OWNER.get()
    if owner is not None:
        owner.tasks.add(task)
        task.add_done_callback(owner.tasks.discard)
    return task


class LoopThread:
    """The thread running the shared loop, and how many members use it."""

    def __init__(self) -> None:
        self.users = 0
        self.closing = False
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._main, name=THREAD_NAME, daemon=True)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (after :func:`acquire_loop` returned this thread)."""
        assert self._loop is not None
        return self._loop

    def start(self) -> None:
        """Start the thread and wait until its loop runs callbacks."""
        self.thread.start()
        self._ready.wait()

    def release(self) -> None:
        """A member is done with the loop (any thread); the last one stops it."""
        global _current
        with _lock:
            self.users -= 1
            if self.users > 0:
                return
            self.closing = True
            if _current is self:
                _current = None
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        loop.set_task_factory(_task_factory)  # type: ignore[arg-type]
        self._loop = loop
        loop.call_soon(self._ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """What no member awaited any more (normally nothing: each cancels its own)."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


_lock = threading.Lock()
_current: LoopThread | None = None


def acquire_loop() -> LoopThread:
    """The process's loop thread, started if none runs; the caller must :meth:`~LoopThread.
    release` it once.

    Raises ``RuntimeError`` on the loop thread itself (a ``logger`` handler or anything else the
    members' loop runs): a member started there would wait for its own thread forever.
    """
    global _current
    with _lock:
        current = _current
        if current is not None and threading.current_thread() is current.thread:
            raise RuntimeError(
                f"a consumer cannot be created on the {THREAD_NAME!r} thread, which runs every "
                "member's loop (from a logger handler, say): create it on another thread"
            )
        if current is None:
            current = _current = LoopThread()
            current.start()
        current.users += 1
        return current


def _forget_after_fork() -> None:
    """A forked child has no loop thread (only the forking thread survives a fork)."""
    global _current, _lock
    _current = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
