"""What the background loop does with the bridge's requests and cells (no broker needed: the
member stays unsubscribed, so the loop's one request of its own is a coordinator lookup that
finds nobody)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer._bridge.messages import AppEvent, FetchCommitted, StateChanged, StopLoop, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._bridge.settings import ClusterSettings
from consumer._runtime import BackgroundRuntime
from consumer.errors import KafkaConnectionError
from consumer.member import (
    ApplyAssignment,
    AppPolled,
    Member,
    MemberConfig,
    MemberState,
    TopicPartition,
)
from consumer.member.effects import MemberRule
from consumer.member.rules import RULES

#: Nothing listens there; the tests never let a request reach it.
_NOWHERE = ClusterSettings("127.0.0.1:9", "test-client", connect_timeout_ms=1_000)


def _runtime(to_background: ToBackground[AppEvent]) -> BackgroundRuntime:
    to_application: ToApplication[ToAppEvent] = ToApplication()
    return BackgroundRuntime(
        MemberConfig(group_id="g"), _NOWHERE, to_background, to_application, last_poll=LastPoll()
    )


def test_a_committed_request_queued_behind_a_stop_is_refused_not_left_hanging() -> None:
    to_background: ToBackground[AppEvent] = ToBackground()
    runtime = _runtime(to_background)
    request = FetchCommitted((TopicPartition("t", 0),), timeout_s=30.0)
    to_background.put(StopLoop())
    to_background.put(request)
    runtime.start()
    assert runtime.wait_finished(5.0)
    with pytest.raises(KafkaConnectionError, match="not running"):
        request.reply.result(timeout=5.0)
    assert runtime.failure is None


def test_a_committed_request_in_flight_when_the_loop_stops_is_refused() -> None:
    to_background: ToBackground[AppEvent] = ToBackground()
    runtime = _runtime(to_background)
    runtime.start()
    request = FetchCommitted((TopicPartition("t", 0),), timeout_s=30.0)
    to_background.put(request)
    runtime.stop(timeout_s=10.0)
    assert runtime.finished
    with pytest.raises(KafkaConnectionError):
        request.reply.result(timeout=5.0)


def test_last_poll_keeps_the_latest_stamp_on_the_runtime_clock() -> None:
    cell = LastPoll()
    assert cell.polled_ms == 0
    now = monotonic_ms()
    cell.stamp(now)
    cell.stamp(now + 5)
    assert cell.polled_ms == now + 5


def test_the_runtime_publishes_the_member_state_for_the_application() -> None:
    to_background: ToBackground[AppEvent] = ToBackground()
    runtime = _runtime(to_background)
    assert runtime.state is MemberState.UNSUBSCRIBED
    assert runtime.member_epoch == 0
    assert not runtime.finished


class _MovingMember:
    """Stands in for the member: its answer to one input moves it to RECONCILE_ASSIGNMENT (a
    row fires, told to the runtime's observer as the member does) and asks the application to
    apply an assignment."""

    def __init__(self, member: Member, observer: Callable[[MemberState, MemberRule], None]) -> None:
        self._member = member
        self._observer = observer
        self.state = member.state
        self.member_epoch = member.member_epoch
        self.member_id = member.member_id
        self.config = member.config

    def handle(self, _event: object, _now_ms: int) -> list[ApplyAssignment]:
        previous, self.state = self.state, MemberState.RECONCILE_ASSIGNMENT
        row = next(row for row in RULES.rows if row.dest is MemberState.RECONCILE_ASSIGNMENT)
        self._observer(previous, row)
        added = (TopicPartition("t", 0),)
        return [ApplyAssignment(7, assigned=added, added=added, removed=())]


def test_a_state_change_reaches_the_application_before_the_commands_it_came_with() -> None:
    to_background: ToBackground[AppEvent] = ToBackground()
    to_application: ToApplication[ToAppEvent] = ToApplication()
    runtime = BackgroundRuntime(
        MemberConfig(group_id="g"), _NOWHERE, to_background, to_application, last_poll=LastPoll()
    )
    runtime._member = _MovingMember(runtime._member, runtime._on_transition)  # type: ignore[assignment]
    runtime._requests = None  # type: ignore[assignment]  # not started: no request is sent here
    runtime._feed(AppPolled())  # any input: the stand-in answers every one alike
    queued = [type(event) for event in iter(to_application.pop, None)]
    assert queued == [StateChanged, ApplyAssignment], "on_state_change before on_assign's work"
