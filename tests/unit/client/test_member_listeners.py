"""Member listeners on the application thread: when rebalance events are told relative to the
user's callbacks, state transitions passed through, and a listener's exception surfaced."""

from __future__ import annotations

from typing import Any

import pytest

from consumer._bridge.member_events import RebalanceEvent, StateTransition
from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer, Callbacks
from consumer.member import (
    ApplyAssignment,
    CallbackCompleted,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    RevocationCompleted,
    TopicPartition,
)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _DataPlane:
    """Records what the server asks of the data plane (nothing is fetched)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def assign(self, starts: dict[tuple[str, int], int]) -> None:
        self.calls.append(f"assign {sorted(starts)}")

    def unassign(self, partitions: Any) -> None:
        self.calls.append(f"unassign {sorted(partitions)}")


class _Consumer:
    member_epoch = 7

    def __init__(self) -> None:
        self.asked = 0

    def memberid(self) -> str:
        self.asked += 1
        return "member-1"


def _server(log: list[str]) -> tuple[AppThreadServer, ToApplication[ToAppEvent], _Consumer]:
    def callback(name: str) -> Any:
        return lambda _consumer, partitions: log.append(
            f"{name} {[p.partition for p in partitions]}"
        )

    to_application: ToApplication[ToAppEvent] = ToApplication()
    consumer = _Consumer()
    server = AppThreadServer(
        consumer=consumer,
        dataplane=_DataPlane(),  # type: ignore[arg-type]
        to_background=ToBackground[AppEvent](),
        to_application=to_application,
        callbacks=Callbacks(
            on_assign=callback("on_assign"),
            on_revoke=callback("on_revoke"),
            on_lost=callback("on_lost"),
        ),
        auto_offset_reset="earliest",
        consumed_offsets=lambda partitions: {},
    )
    return server, to_application, consumer


def _listener(log: list[str]) -> Any:
    def listen(event: StateTransition | RebalanceEvent) -> None:
        if isinstance(event, RebalanceEvent):
            assert (event.member_id, event.member_epoch) == ("member-1", 7)
            log.append(f"listener {event.kind} {[p for _, p in event.partitions]}")
        else:
            log.append(f"listener {event.previous}->{event.current}")

    return listen


def test_assigned_is_told_before_on_assign_and_revoked_or_lost_after_their_callback() -> None:
    log: list[str] = []
    server, queue, _ = _server(log)
    server.callbacks.member_listeners.append(_listener(log))
    queue.put(StateTransition("JOINING", "RECONCILE_ASSIGNMENT", "member-1", 0, 7, "X", 1))
    queue.put(ApplyAssignment(1, assigned=(T0, T1), added=(T0, T1), removed=()))
    queue.put(InvokeOnAssign(1, (T0, T1)))
    queue.put(InvokeOnRevoke(2, (T1,)))
    queue.put(InvokeOnLost(3, (T0,)))
    server.serve()
    assert log == [
        "listener JOINING->RECONCILE_ASSIGNMENT",
        "listener assigned [0, 1]",
        "on_assign [0, 1]",
        "on_revoke [1]",
        "listener revoked [1]",
        "on_lost [0]",
        "listener lost [0]",
    ]
    # The completions still reach the member, after the listener ran.
    sent = server.to_background.drain()
    assert [type(e) for e in sent if not type(e).__name__.startswith("Assignment")] == [
        CallbackCompleted,
        RevocationCompleted,
        CallbackCompleted,
    ]


def test_without_listeners_nothing_is_asked_of_the_consumer() -> None:
    log: list[str] = []
    server, queue, consumer = _server(log)
    queue.put(ApplyAssignment(1, assigned=(T0,), added=(T0,), removed=()))
    queue.put(InvokeOnAssign(1, (T0,)))
    server.serve()
    assert log == ["on_assign [0]"]
    assert consumer.asked == 0


def test_a_failing_listener_is_raised_from_the_poll_that_ran_it_and_the_rest_still_run() -> None:
    log: list[str] = []
    server, queue, _ = _server(log)

    def broken(event: object) -> None:
        raise RuntimeError("listener broke")

    server.callbacks.member_listeners.extend([broken, _listener(log)])
    queue.put(StateTransition("STABLE", "STABLE", "member-1", 7, 8, None, 1))
    with pytest.raises(RuntimeError, match="listener broke"):
        server.serve()
    assert log == ["listener STABLE->STABLE"]


def test_loop_reports_are_on_from_the_first_listener_until_the_last_is_removed() -> None:
    from consumer import Consumer

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "listeners"})
    try:
        switch = consumer._server.callbacks.member_events
        assert not switch.on
        first, second = print, repr
        consumer.add_member_listener(first)
        consumer.add_member_listener(second)
        assert switch.on
        consumer.remove_member_listener(first)
        assert switch.on
        consumer.remove_member_listener(second)
        assert not switch.on
        with pytest.raises(ValueError, match="that listener was not added"):
            consumer.remove_member_listener(second)
        with pytest.raises(TypeError, match="listener must be callable, got str"):
            consumer.add_member_listener("print")  # type: ignore[arg-type]
    finally:
        consumer.close()
