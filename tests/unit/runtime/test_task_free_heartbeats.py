"""TaskFreeHeartbeats: when the loop may skip its timer because an answer runs the next turn."""

from __future__ import annotations

from typing import Any

from consumer._runtime.heartbeat_path import TaskFreeHeartbeats
from consumer.member import HeartbeatSucceeded, HeartbeatTransportFailed, SendHeartbeat
from consumer.member.commands import HeartbeatRequest


class _Requests:
    """Stands in for GroupRequests.heartbeat_soon: records the callbacks, sends nothing."""

    def __init__(self, accepts: bool) -> None:
        self.accepts = accepts
        self.sent: list[tuple[int, Any]] = []

    def heartbeat_soon(
        self, command: SendHeartbeat, timeout_ms: int, on_answer: Any, on_bug: Any
    ) -> bool:
        if self.accepts:
            self.sent.append((timeout_ms, on_answer))
        return self.accepts


def _rig(accepts: bool = True) -> tuple[TaskFreeHeartbeats, _Requests, list[int], list[object]]:
    requests = _Requests(accepts)
    clock = [10_000]
    fed: list[object] = []
    heartbeats = TaskFreeHeartbeats(
        requests,  # type: ignore[arg-type]
        interval_ms=lambda: 500,
        request_timeout_ms=30_000,
        clock_ms=lambda: clock[0],
        feed=fed.append,
        after_answer=lambda: fed.append("turn"),
        fail=fed.append,
    )
    return heartbeats, requests, clock, fed


def _command(request_id: int) -> SendHeartbeat:
    return SendHeartbeat(request_id, HeartbeatRequest(group_id="g", member_id="m", member_epoch=1))


def test_no_answer_in_flight_means_a_timer_is_needed() -> None:
    heartbeats, _, _, _ = _rig()
    assert not heartbeats.answer_comes_by(10**12)


def test_the_answer_or_its_timeout_comes_by_a_deadline_at_or_after_the_timeout() -> None:
    heartbeats, requests, clock, fed = _rig()
    assert heartbeats.send(_command(1))
    ((timeout_ms, on_answer),) = requests.sent
    assert timeout_ms == 3_000  # two intervals, at least 3 s
    assert heartbeats.answer_comes_by(clock[0] + 3_000)
    assert heartbeats.answer_comes_by(clock[0] + 4_186)
    assert not heartbeats.answer_comes_by(clock[0] + 2_999)
    answer = HeartbeatSucceeded(1, 1, 500, None, "m")
    on_answer(answer)
    assert fed == [answer, "turn"]
    assert not heartbeats.answer_comes_by(clock[0] + 4_186)  # nothing in flight any more


def test_a_heartbeat_a_task_must_send_promises_nothing() -> None:
    heartbeats, _, clock, _ = _rig(accepts=False)
    assert not heartbeats.send(_command(1))
    assert heartbeats.in_flight == 0
    assert not heartbeats.answer_comes_by(clock[0] + 60_000)


def test_a_failed_answer_is_fed_and_runs_the_turn_too() -> None:
    heartbeats, requests, _, fed = _rig()
    heartbeats.send(_command(1))
    failure = HeartbeatTransportFailed(1, "timed out")
    requests.sent[0][1](failure)
    assert fed == [failure, "turn"]
    assert heartbeats.in_flight == 0
