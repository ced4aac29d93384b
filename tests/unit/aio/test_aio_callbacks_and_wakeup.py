"""consumer.aio's parts without a broker: async rebalance callbacks parking the server, the
callback task surviving a cancelled poll, misuse from inside a callback, and the loop wake-up."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from consumer import CallbackMisuseError, Consumer
from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer, Callbacks
from consumer.aio._callbacks import CallbackRunner, bind_callback, refuse_in_callback
from consumer.aio._wakeup import LoopWakeup
from consumer.member import (
    CallbackCompleted,
    InvokeOnAssign,
    InvokeOnRevoke,
    RevocationCompleted,
    TopicPartition,
)

T0 = TopicPartition("t", 0)


class _DataPlane:
    def assign(self, starts: dict[tuple[str, int], int]) -> None:
        pass

    def unassign(self, partitions: Any) -> None:
        pass


def _server(
    on_revoke: Any = None, on_assign: Any = None
) -> tuple[AppThreadServer, ToApplication[ToAppEvent], ToBackground[AppEvent]]:
    to_application: ToApplication[ToAppEvent] = ToApplication()
    to_background: ToBackground[AppEvent] = ToBackground()
    server = AppThreadServer(
        consumer=object(),
        dataplane=_DataPlane(),  # type: ignore[arg-type]
        to_background=to_background,
        to_application=to_application,
        callbacks=Callbacks(on_assign=on_assign, on_revoke=on_revoke),
        auto_offset_reset="earliest",
        consumed_offsets=lambda partitions: {},
    )
    return server, to_application, to_background


@pytest.mark.asyncio
async def test_an_async_callback_parks_the_server_and_survives_a_cancelled_wait() -> None:
    started, may_finish = asyncio.Event(), asyncio.Event()
    log: list[str] = []

    async def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        log.append("revoke started")
        started.set()
        await may_finish.wait()
        log.append("revoke done")

    server, queue, to_background = _server(
        on_revoke=on_revoke, on_assign=lambda _c, _p: log.append("assign")
    )
    queue.put(InvokeOnRevoke(1, (T0,)))
    queue.put(InvokeOnAssign(2, (T0,)))
    server.serve()
    assert server.parked is not None
    assert server.in_callback
    assert to_background.drain() == []  # the member is not told before the callback ends
    assert len(queue) == 1  # nothing after it is served meanwhile
    runner = CallbackRunner(server)
    waiting = asyncio.create_task(runner.finish())
    await asyncio.wait_for(started.wait(), 5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert server.parked is not None  # the callback goes on without the cancelled waiter
    may_finish.set()
    await runner.finish()
    assert log == ["revoke started", "revoke done"]
    assert server.parked is None
    assert not server.in_callback
    assert to_background.drain() == [RevocationCompleted(1, None)]
    server.serve()
    assert log[-1] == "assign"
    assert CallbackCompleted(2, None) in to_background.drain()


@pytest.mark.asyncio
async def test_an_async_callback_error_is_reported_and_raised_from_the_next_serve() -> None:
    async def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    server, queue, to_background = _server(on_assign=on_assign)
    queue.put(InvokeOnAssign(3, (T0,)))
    server.serve()
    await CallbackRunner(server).finish()
    assert CallbackCompleted(3, "ValueError: boom") in to_background.drain()
    with pytest.raises(ValueError, match="boom"):
        server.serve()


@pytest.mark.asyncio
async def test_calls_that_would_wait_for_the_callback_are_refused_inside_it() -> None:
    refused: list[str] = []

    async def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        for method in ("poll", "close"):
            with pytest.raises(CallbackMisuseError, match=rf"{method}\(\) may not be called"):
                refuse_in_callback(method)
            refused.append(method)

    server, queue, _ = _server(on_assign=on_assign)
    queue.put(InvokeOnAssign(4, (T0,)))
    server.serve()
    await CallbackRunner(server).finish()
    assert refused == ["poll", "close"]
    refuse_in_callback("poll")  # outside the callback: allowed


def test_bound_callbacks_receive_the_async_consumer() -> None:
    seen: list[Any] = []
    owner = object()
    bound = bind_callback(owner, "on_assign", lambda c, parts: seen.append((c, parts)))
    assert bound is not None
    bound("the sync consumer", [1])
    assert seen == [(owner, [1])]
    assert bind_callback(owner, "on_revoke", None) is None
    with pytest.raises(TypeError, match="on_lost must be callable, got 42"):
        bind_callback(owner, "on_lost", 42)  # type: ignore[arg-type]


def test_the_sync_consumer_refuses_async_callbacks_naming_them() -> None:
    async def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        pass

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    try:
        with pytest.raises(TypeError, match=r"on_assign is an async function.*consumer\.aio"):
            consumer.subscribe(["t"], on_assign=on_assign)
    finally:
        consumer.close()


@pytest.mark.asyncio
async def test_the_wakeup_is_woken_from_another_thread() -> None:
    wakeup = LoopWakeup()
    wakeup.notify_threadsafe()  # before bind: nobody to wake, no error
    wakeup.bind()
    start = time.monotonic()
    await wakeup.wait(0.02)
    assert time.monotonic() - start >= 0.02  # no notification: the timeout ends the wait
    waiter = asyncio.create_task(wakeup.wait(30))
    await asyncio.sleep(0)  # the waiter takes the current event
    thread = threading.Thread(target=wakeup.notify_threadsafe)
    thread.start()
    thread.join()
    await asyncio.wait_for(waiter, 5)


def test_the_wakeup_belongs_to_one_loop() -> None:
    wakeup = LoopWakeup()

    async def bind() -> None:
        wakeup.bind()

    asyncio.run(bind())
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(bind())
