"""The background loop's sleep: until a deadline or a wake-up (LoopWakeup)."""

from __future__ import annotations

import asyncio
import time

from consumer._runtime.loop_wakeup import LoopWakeup


def test_wait_returns_at_the_timeout_without_a_wakeup() -> None:
    async def main() -> float:
        wakeup = LoopWakeup(asyncio.get_running_loop())
        start = time.monotonic()
        await wakeup.wait(0.05)
        return time.monotonic() - start

    assert 0.045 <= asyncio.run(main()) < 2.0


def test_set_wakes_the_sleeper_before_its_timeout() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        wakeup = LoopWakeup(loop)
        loop.call_later(0.01, wakeup.set)
        start = time.monotonic()
        await wakeup.wait(30)
        return time.monotonic() - start

    assert asyncio.run(main()) < 5.0


def test_a_set_without_a_sleeper_is_kept_until_clear() -> None:
    async def main() -> tuple[float, float]:
        wakeup = LoopWakeup(asyncio.get_running_loop())
        wakeup.set()
        start = time.monotonic()
        await wakeup.wait(30)  # returns at once: set before the wait
        kept = time.monotonic() - start
        wakeup.set()
        wakeup.clear()
        start = time.monotonic()
        await wakeup.wait(0.05)  # the cleared wake-up is forgotten: the timeout ends it
        return kept, time.monotonic() - start

    kept, cleared = asyncio.run(main())
    assert kept < 5.0
    assert cleared >= 0.045


def test_the_timer_is_cancelled_when_a_wakeup_ends_the_wait() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        wakeup = LoopWakeup(loop)
        loop.call_soon(wakeup.set)
        await wakeup.wait(60)
        return sum(1 for handle in loop._scheduled if not handle.cancelled())  # type: ignore[attr-defined]

    assert asyncio.run(main()) == 0
