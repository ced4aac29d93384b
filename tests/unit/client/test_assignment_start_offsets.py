"""Where the application thread starts each new partition of ApplyAssignment: ``on_assign``'s own
choice first; else the partition waits for the fetch of its committed offset and starts at its
StartFetching: at the committed offset, else (nothing committed) it waits for the reset policy's
lookup named as the follow-up and starts at that one's StartFetching (the absolute offset found,
else the logical one), else at the logical offset. It starts only if it is still owned and still
waits for that lookup."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer, Callbacks
from consumer.member import (
    ApplyAssignment,
    AssignmentApplied,
    FetchingStopped,
    InvokeOnAssign,
    StartFetching,
    StopFetching,
    TopicPartition,
)

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
FETCH = 8  # the committed-offsets fetch job
LOOKUP = 9  # the reset policy's lookup that follows it


class _DataPlane:
    def __init__(self) -> None:
        self.starts: dict[tuple[str, int], int] = {}

    def assign(self, starts: dict[tuple[str, int], int]) -> None:
        self.starts.update(starts)

    def unassign(self, partitions: Any) -> None:
        for key in list(partitions):
            self.starts.pop(key, None)

    def positions(self, keys: Any) -> dict[tuple[str, int], int]:
        return {key: self.starts[key] for key in keys if key in self.starts}


class _Consumer:
    """The facade as ``on_assign`` sees it: ``incremental_assign`` chooses start offsets."""

    member_epoch = 1
    server: AppThreadServer

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        self.server.choose_start_offsets(partitions)


class _Rig:
    def __init__(self, policy: str, on_assign: Any = None) -> None:
        self.plane = _DataPlane()
        consumer = _Consumer()
        self.to_application: ToApplication[ToAppEvent] = ToApplication()
        self.to_background = ToBackground[AppEvent]()
        self.server = AppThreadServer(
            consumer=consumer,
            dataplane=self.plane,  # type: ignore[arg-type]
            to_background=self.to_background,
            to_application=self.to_application,
            callbacks=Callbacks(on_assign=on_assign),
            auto_offset_reset=policy,
            consumed_offsets=lambda partitions: {},
        )
        consumer.server = self.server

    def serve(self, *events: ToAppEvent) -> dict[tuple[str, int], int]:
        for event in events:
            self.to_application.put(event)
        self.server.serve()
        return dict(self.plane.starts)


def _apply(request_id: int = 1) -> ApplyAssignment:
    return ApplyAssignment(
        request_id,
        assigned=(T0, T1, T2),
        added=(T0, T1, T2),
        removed=(),
        awaiting_start=(T0, T1, T2),
        start_request_id=FETCH,
    )


#: The fetch's end: T0 has a committed offset, T1 and T2 wait for the reset policy's lookup.
FETCHED = StartFetching(FETCH, {T0: 40}, then_request_id=LOOKUP)


@pytest.mark.parametrize(
    ("policy", "logical"), [("earliest", OFFSET_BEGINNING), ("latest", OFFSET_END)]
)
def test_committed_when_fetched_then_the_lookup_found_or_else_logical(
    policy: str, logical: int
) -> None:
    rig = _Rig(policy)
    assert rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2))) == {}
    # Acknowledged without waiting for the committed offsets.
    assert AssignmentApplied(1) in rig.to_background.drain()
    assert rig.server.start_offsets.awaiting == {("t", p): FETCH for p in range(3)}
    assert rig.serve(FETCHED) == {("t", 0): 40}
    assert rig.server.start_offsets.awaiting == {("t", 1): LOOKUP, ("t", 2): LOOKUP}
    starts = rig.serve(StartFetching(LOOKUP, {T1: 7}))  # T2's lookup failed
    assert starts == {("t", 0): 40, ("t", 1): 7, ("t", 2): logical}
    assert not rig.server.start_offsets.awaiting


@pytest.mark.parametrize(
    ("policy", "logical"), [("earliest", OFFSET_BEGINNING), ("error", OFFSET_STORED)]
)
def test_without_a_follow_up_nothing_committed_starts_at_the_logical_offset(
    policy: str, logical: int
) -> None:
    """``auto.offset.reset=error`` has no lookup (librdkafka raises its reset error); any
    answer without a follow-up is the same case."""
    rig = _Rig(policy)
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)))
    starts = rig.serve(StartFetching(FETCH, {T1: 3}))
    assert starts == {("t", 0): logical, ("t", 1): 3, ("t", 2): logical}
    assert not rig.server.start_offsets.awaiting


def test_on_assign_start_offsets_win_and_wait_for_nothing() -> None:
    def on_assign(consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        consumer.incremental_assign([KafkaTopicPartition("t", 1, 3)])

    rig = _Rig("earliest", on_assign)
    assert rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2))) == {("t", 1): 3}
    assert rig.serve(FETCHED) == {("t", 0): 40, ("t", 1): 3}
    assert rig.serve(StartFetching(LOOKUP, {T1: 7, T2: 0})) == {
        ("t", 0): 40,
        ("t", 1): 3,
        ("t", 2): 0,
    }


def test_a_partition_revoked_before_its_committed_offset_came_is_not_started() -> None:
    rig = _Rig("earliest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)))
    revoke_t0 = ApplyAssignment(2, assigned=(T1, T2), added=(), removed=(T0,))
    rig.serve(revoke_t0, InvokeOnAssign(3, ()))
    assert rig.serve(StartFetching(FETCH, {T0: 40, T1: 41, T2: 42})) == {
        ("t", 1): 41,
        ("t", 2): 42,
    }
    assert not rig.server.start_offsets.awaiting


def test_a_partition_stopped_for_its_revocation_before_its_offset_came_is_not_started() -> None:
    """The answer comes between StopFetching and the end of the revocation: the partition is
    still owned (on_revoke has not run) but must not fetch again."""
    rig = _Rig("earliest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)))
    rig.serve(StopFetching(2, (T1,)))
    assert FetchingStopped(2, {}) in rig.to_background.drain()
    assert T1 in rig.server.owned
    assert rig.serve(StartFetching(FETCH, {T0: 40, T1: 41, T2: 42})) == {
        ("t", 0): 40,
        ("t", 2): 42,
    }


def test_a_partition_revoked_before_its_start_offset_came_is_not_started() -> None:
    rig = _Rig("earliest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)), FETCHED)
    revoke_t1 = ApplyAssignment(2, assigned=(T0, T2), added=(), removed=(T1,))
    rig.serve(revoke_t1, InvokeOnAssign(3, ()))
    assert rig.serve(StartFetching(LOOKUP, {T1: 7, T2: 5})) == {("t", 0): 40, ("t", 2): 5}


def test_a_partition_revoked_between_the_fetch_and_its_follow_up_is_not_started() -> None:
    rig = _Rig("latest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)))
    rig.serve(ApplyAssignment(2, assigned=(T0, T2), added=(), removed=(T1,)), InvokeOnAssign(3, ()))
    assert rig.serve(FETCHED) == {("t", 0): 40}
    assert rig.server.start_offsets.awaiting == {("t", 2): LOOKUP}
    assert rig.serve(StartFetching(LOOKUP, {T1: 7, T2: 5})) == {("t", 0): 40, ("t", 2): 5}


def test_an_answer_to_an_older_lookup_starts_nothing() -> None:
    """T1 was revoked and assigned again; it now waits for the new fetch only."""
    rig = _Rig("latest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)))
    rig.serve(ApplyAssignment(2, assigned=(T0, T2), added=(), removed=(T1,)), InvokeOnAssign(3, ()))
    again = ApplyAssignment(
        4,
        assigned=(T0, T1, T2),
        added=(T1,),
        removed=(),
        awaiting_start=(T1,),
        start_request_id=FETCH + 10,
    )
    rig.serve(again, InvokeOnAssign(5, (T1,)))
    assert ("t", 1) not in rig.serve(StartFetching(FETCH, {T0: 1, T1: 7, T2: 5}))
    assert ("t", 1) not in rig.serve(StartFetching(LOOKUP, {T1: 7}))
    assert rig.serve(StartFetching(FETCH + 10, {T1: 8}))[("t", 1)] == 8


@pytest.mark.parametrize("offset", [5, OFFSET_BEGINNING])
def test_seek_starts_a_waiting_partition_there_and_its_answer_moves_it_no_more(
    offset: int,
) -> None:
    """Between the ack and the start offsets' answer a new partition is owned but not fetched:
    ``seek()`` decides its start (as on any owned partition), the late answer does not."""
    rig = _Rig("earliest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)))
    assert rig.server.seek_waiting(KafkaTopicPartition("t", 1, offset))
    assert rig.plane.starts == {("t", 1): offset}
    assert rig.serve(FETCHED) == {("t", 0): 40, ("t", 1): offset}
    assert rig.serve(StartFetching(LOOKUP, {T1: 7, T2: 5})) == {
        ("t", 0): 40,
        ("t", 1): offset,
        ("t", 2): 5,
    }


def test_seek_leaves_other_partitions_and_stored_offsets_to_the_data_plane() -> None:
    rig = _Rig("earliest")
    rig.serve(_apply(), InvokeOnAssign(1, (T0, T1, T2)), FETCHED)
    assert not rig.server.seek_waiting(KafkaTopicPartition("t", 0, 3))  # already fetching
    assert not rig.server.seek_waiting(KafkaTopicPartition("t", 3, 3))  # not owned
    assert not rig.server.seek_waiting(KafkaTopicPartition("t", 1, OFFSET_STORED))
    assert rig.server.start_offsets.awaiting == {("t", 1): LOOKUP, ("t", 2): LOOKUP}
