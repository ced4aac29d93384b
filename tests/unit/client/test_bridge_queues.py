"""The two queues between the application thread and the background loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from consumer._bridge.queues import ToApplication, ToBackground


def test_to_background_wakes_the_loop_from_another_thread() -> None:
    queue: ToBackground[int] = ToBackground()

    async def main() -> list[int]:
        wakeup = asyncio.Event()
        queue.attach(asyncio.get_running_loop(), wakeup)
        threading.Thread(target=queue.put, args=(7,)).start()
        await asyncio.wait_for(wakeup.wait(), timeout=5)
        return queue.drain()

    assert asyncio.run(main()) == [7]


def test_to_background_keeps_order_and_drain_empties_it() -> None:
    queue: ToBackground[int] = ToBackground()
    for item in range(5):
        queue.put(item)  # not attached yet: items wait for the loop
    assert queue.drain() == [0, 1, 2, 3, 4]
    assert queue.drain() == []


def test_put_for_next_turn_neither_wakes_the_loop_nor_tells_the_listeners() -> None:
    queue: ToBackground[str] = ToBackground()
    told: list[str] = []
    queue.add_listener(lambda: told.append("put"))

    async def main() -> tuple[bool, list[str]]:
        wakeup = asyncio.Event()
        queue.attach(asyncio.get_running_loop(), wakeup)
        queue.put_for_next_turn("report")
        await asyncio.sleep(0.05)  # a wake-up, had one been asked for, would have run by now
        woken_early = wakeup.is_set()
        queue.put("commit")  # a waking put delivers the earlier item too, in order
        await asyncio.wait_for(wakeup.wait(), timeout=5)
        return woken_early, queue.drain()

    woken_early, items = asyncio.run(main())
    assert not woken_early
    assert items == ["report", "commit"]
    assert told == ["put"]


def test_woken_says_whether_a_waking_put_waits_for_the_next_drain() -> None:
    queue: ToBackground[str] = ToBackground()
    queue.put_for_next_turn("report")
    assert queue
    assert not queue.woken
    queue.put("commit")
    assert queue.woken
    assert queue.drain() == ["report", "commit"]
    assert not queue.woken


def test_put_after_the_loop_closed_does_not_raise() -> None:
    queue: ToBackground[int] = ToBackground()
    loop = asyncio.new_event_loop()
    queue.attach(loop, asyncio.Event())
    loop.close()
    queue.put(1)
    assert queue.drain() == [1]


def test_to_application_wait_returns_when_an_item_arrives() -> None:
    queue: ToApplication[str] = ToApplication()
    assert not queue
    assert queue.pop() is None
    arrived = threading.Event()

    def producer() -> None:
        arrived.wait(5)
        queue.put("assign")

    thread = threading.Thread(target=producer)
    thread.start()
    arrived.set()
    assert queue.wait(timeout_s=5)
    assert len(queue) == 1
    assert queue.pop() == "assign"
    thread.join()


def test_to_application_wait_times_out_when_nothing_comes() -> None:
    queue: ToApplication[str] = ToApplication()
    assert queue.wait(timeout_s=0.01) is False


@pytest.mark.parametrize("count", [1, 100])
def test_to_application_listeners_run_after_every_put(count: int) -> None:
    queue: ToApplication[int] = ToApplication()
    seen: list[int] = []
    queue.add_listener(lambda: seen.append(len(queue)))
    for item in range(count):
        queue.put(item)
    assert seen == list(range(1, count + 1))


def test_to_background_listeners_run_before_each_item_is_queued() -> None:
    queue: ToBackground[int] = ToBackground()
    seen_lengths: list[int] = []
    queue.add_listener(lambda: seen_lengths.append(len(queue.drain())))
    assert not queue
    queue.put(1)
    queue.put(2)
    # Each listener ran before its item was queued (it drained the one before).
    assert seen_lengths == [0, 1]
    assert queue
    assert queue.drain() == [2]
