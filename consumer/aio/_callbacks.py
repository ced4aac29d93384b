"""Rebalance callbacks on the event loop, plain or ``async def``.

The consumer's server (``consumer._client.app_thread``) calls each rebalance callback on the
thread that polls, here the event loop's. A plain callback runs there and then. An ``async def``
callback returns a coroutine: the server parks it and serves nothing else; :class:`CallbackRunner`
runs it as a task of its own and completes the rebalance step when it ends. The task survives
the cancellation of the ``poll()`` that found it: the next ``poll()`` (or ``close()``) finishes
the step, so a cancelled poll never leaves the member half-way through a rebalance.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.app_thread import AppThreadServer, ParkedCallback
from consumer._client.errors import CallbackMisuseError

__all__ = ["CallbackRunner", "bind_callback", "in_callback", "refuse_in_callback"]

#: ``callback(consumer, partitions)``: returns None, or an awaitable (an ``async def``).
UserCallback = Callable[[Any, list[KafkaTopicPartition]], object]

#: True inside the task of an ``async def`` rebalance callback (and tasks it starts).
_IN_CALLBACK: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "consumer_aio_in_rebalance_callback", default=False
)


#: True inside an ``async def`` rebalance callback (a bound ``ContextVar.get``: cheap).
in_callback = _IN_CALLBACK.get


def refuse_in_callback(method: str) -> None:
    """Raise :class:`CallbackMisuseError` when called from an ``async def`` rebalance callback
    (``poll()`` there would wait for the callback itself)."""
    if _IN_CALLBACK.get():
        raise CallbackMisuseError(f"{method}() may not be called from a rebalance callback")


def bind_callback(
    owner: object, name: str, callback: UserCallback | None
) -> Callable[[Any, list[KafkaTopicPartition]], Any] | None:
    """The callback the server calls: the user's ``name`` callback, given ``owner`` (the
    AsyncConsumer) instead of the wrapped ``Consumer``."""
    if callback is None:
        return None
    if not callable(callback):
        raise TypeError(f"{name} must be callable, got {callback!r}")

    def call(_consumer: object, partitions: list[KafkaTopicPartition]) -> object:
        return callback(owner, partitions)

    return call


async def _await(awaitable: Awaitable[object]) -> None:
    await awaitable


class CallbackRunner:
    """Runs the server's parked callback (one at a time) and completes its rebalance step."""

    def __init__(self, server: AppThreadServer) -> None:
        self._server = server
        self._parked: ParkedCallback | None = None
        self._task: asyncio.Task[None] | None = None

    async def finish(self) -> None:
        """Run the parked callbacks to their end (nothing to do when none is parked).

        Cancelling the caller leaves the callback's task running; the next call waits for it.
        """
        while (parked := self._server.parked) is not None:
            task = self._task_for(parked)
            await asyncio.wait({task})
            if self._server.parked is not parked:
                continue  # another waiter completed it
            self._parked, self._task = None, None
            error: BaseException | None
            if task.cancelled():
                error = asyncio.CancelledError("the rebalance callback was cancelled")
            else:
                error = task.exception()
            self._server.finish_parked(error)

    def _task_for(self, parked: ParkedCallback) -> asyncio.Task[None]:
        if self._task is not None and self._parked is parked:
            return self._task
        context = contextvars.copy_context()
        context.run(_IN_CALLBACK.set, True)
        task = asyncio.get_running_loop().create_task(
            _await(parked.awaitable), name="consumer.aio rebalance callback", context=context
        )
        self._parked, self._task = parked, task
        return task
