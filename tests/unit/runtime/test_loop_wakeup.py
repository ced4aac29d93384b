"""When the background loop's turn runs: at a deadline or a wake-up (LoopWakeup)."""

from __future__ import annotations

import asyncio
import time

from consumer._runtime.loop_wakeup import LoopWakeup


def _live_timers(loop: asyncio.AbstractEventLoop) -> int:
    scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
    return sum(1 for handle in scheduled if not handle.cancelled())


def test_a_scheduled_turn_runs_at_its_timeout_without_a_wakeup() -> None:
    async def main() -> float:
        ran: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        wakeup = LoopWakeup(asyncio.get_running_loop(), lambda: ran.set_result(time.monotonic()))
        start = time.monotonic()
        wakeup.schedule(0.05)
        return await asyncio.wait_for(ran, 5) - start

    assert 0.045 <= asyncio.run(main()) < 2.0


def test_set_runs_the_turn_before_its_timeout_and_cancels_the_timer() -> None:
    async def main() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        ran: asyncio.Future[float] = loop.create_future()
        wakeup = LoopWakeup(loop, lambda: ran.set_result(time.monotonic()))
        wakeup.schedule(30)
        start = time.monotonic()
        loop.call_later(0.01, wakeup.set)
        elapsed = await asyncio.wait_for(ran, 5) - start
        return elapsed, _live_timers(loop)

    elapsed, timers = asyncio.run(main())
    assert elapsed < 5.0
    assert timers == 0


def test_many_sets_run_one_turn_and_a_set_during_a_turn_runs_the_next_right_after() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        runs: list[str] = []
        done: asyncio.Future[None] = loop.create_future()

        def turn() -> None:
            wakeup.clear()
            runs.append("turn")
            if len(runs) == 1:
                wakeup.set()  # woken during the turn: the schedule below must not wait 30 s
            else:
                done.set_result(None)
            wakeup.schedule(30)

        wakeup = LoopWakeup(loop, turn)
        wakeup.set()
        wakeup.set()
        wakeup.set()
        await asyncio.wait_for(done, 5)
        await asyncio.sleep(0.05)  # no third turn comes (its timer is 30 s away)
        return runs

    assert asyncio.run(main()) == ["turn", "turn"]


def test_clear_forgets_a_scheduled_turn_and_close_stops_all() -> None:
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        runs: list[int] = []
        wakeup = LoopWakeup(loop, lambda: runs.append(1))
        wakeup.schedule(0.01)
        wakeup.set()
        wakeup.clear()
        await asyncio.sleep(0.05)
        cleared = len(runs)
        wakeup.close()
        wakeup.set()
        wakeup.schedule(0)
        await asyncio.sleep(0.05)
        return cleared, len(runs)

    assert asyncio.run(main()) == (0, 0)


def test_a_zero_or_negative_timeout_runs_the_turn_soon_and_none_waits_for_a_wakeup() -> None:
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        runs: list[int] = []
        wakeup = LoopWakeup(loop, lambda: runs.append(1))
        wakeup.schedule(None)
        await asyncio.sleep(0.05)
        without = len(runs)
        wakeup.schedule(-1)
        await asyncio.sleep(0)
        return without, len(runs)

    assert asyncio.run(main()) == (0, 1)
