"""A blocking adapter over ``consumer.aio.AsyncConsumer``, so tests written for the synchronous
``Consumer`` API run unchanged on the async consumer.

Each adapter owns one event loop: the awaitable methods (``poll``, ``consume``, ``commit``,
``committed``, ``close``) run to completion on it, the others are the AsyncConsumer's own. The
rebalance callbacks run on that loop inside ``poll()`` / ``consume()`` / ``close()``, as
AsyncConsumer runs them, and receive the adapter (so a callback written for the synchronous API
can call ``position()`` or ``assignment()`` on it).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from consumer.aio import AsyncConsumer

T = TypeVar("T")

RebalanceCallback = Callable[[Any, list[Any]], object]


class BlockingAsyncConsumer:
    """``AsyncConsumer`` behind the synchronous ``Consumer`` API (see the module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._loop = asyncio.new_event_loop()

        async def build() -> AsyncConsumer:
            return AsyncConsumer(config)

        try:
            self.inner = self._run(build())
        except BaseException:
            self._loop.close()
            raise

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coroutine)

    def subscribe(self, topics: list[str], **callbacks: RebalanceCallback | None) -> None:
        """``subscribe()``; each callback gets this adapter as its consumer argument."""
        bound = {
            name: functools.partial(self._call_with_self, callback)
            for name, callback in callbacks.items()
            if callback is not None
        }
        self.inner.subscribe(topics, **bound)

    def _call_with_self(
        self, callback: RebalanceCallback, _inner: Any, partitions: list[Any]
    ) -> object:
        return callback(self, partitions)

    def poll(self, timeout: float | None = -1) -> Any:
        return self._run(self.inner.poll(timeout))

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Any]:
        return self._run(self.inner.consume(num_messages, timeout))

    def commit(
        self, message: Any = None, offsets: list[Any] | None = None, asynchronous: bool = True
    ) -> Any:
        """``commit()`` with the synchronous API's default (``asynchronous=True``)."""
        return self._run(self.inner.commit(message, offsets, asynchronous=asynchronous))

    def committed(self, partitions: list[Any], timeout: float | None = -1) -> list[Any]:
        return self._run(self.inner.committed(partitions, timeout))

    def close(self) -> None:
        self._run(self.inner.close())

    def __enter__(self) -> BlockingAsyncConsumer:
        """``with`` runs the AsyncConsumer's ``async with``."""
        self._run(self.inner.__aenter__())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._run(self.inner.__aexit__(*exc_info))

    def dispose(self) -> None:
        """Close the consumer if needed, then the adapter's event loop (test teardown)."""
        try:
            self.close()
        finally:
            self._loop.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
