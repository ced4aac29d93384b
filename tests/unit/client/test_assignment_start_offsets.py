"""Where the application thread starts each new partition of ApplyAssignment: the committed
offset, else the start offset the member's round looked up, else the reset policy's logical
offset (the lookup failed; the data plane resolves it), and ``on_assign``'s own choice first."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer, Callbacks
from consumer.member import ApplyAssignment, InvokeOnAssign, TopicPartition

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))


class _DataPlane:
    def __init__(self) -> None:
        self.starts: dict[tuple[str, int], int] = {}

    def assign(self, starts: dict[tuple[str, int], int]) -> None:
        self.starts.update(starts)

    def unassign(self, partitions: Any) -> None:
        pass


class _Consumer:
    """The facade as ``on_assign`` sees it: ``incremental_assign`` chooses start offsets."""

    member_epoch = 1
    server: AppThreadServer

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        self.server.choose_start_offsets(partitions)


def _starts(
    policy: str, command: ApplyAssignment, on_assign: Any = None
) -> dict[tuple[str, int], int]:
    plane = _DataPlane()
    consumer = _Consumer()
    to_application: ToApplication[ToAppEvent] = ToApplication()
    server = AppThreadServer(
        consumer=consumer,
        dataplane=plane,  # type: ignore[arg-type]
        to_background=ToBackground[AppEvent](),
        to_application=to_application,
        callbacks=Callbacks(on_assign=on_assign),
        auto_offset_reset=policy,
        consumed_offsets=lambda partitions: {},
    )
    consumer.server = server
    to_application.put(command)
    to_application.put(InvokeOnAssign(1, command.added))
    server.serve()
    return plane.starts


def _command() -> ApplyAssignment:
    return ApplyAssignment(
        1,
        assigned=(T0, T1, T2),
        added=(T0, T1, T2),
        removed=(),
        committed_offsets={T0: 40, T1: None, T2: None},
        start_offsets={T1: 7},  # T2's lookup failed
    )


@pytest.mark.parametrize(
    ("policy", "logical"),
    [("earliest", OFFSET_BEGINNING), ("latest", OFFSET_END), ("error", OFFSET_STORED)],
)
def test_committed_then_looked_up_then_logical(policy: str, logical: int) -> None:
    assert _starts(policy, _command()) == {("t", 0): 40, ("t", 1): 7, ("t", 2): logical}


def test_on_assign_start_offsets_win() -> None:
    def on_assign(consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        consumer.incremental_assign([KafkaTopicPartition("t", 1, 3)])

    starts = _starts("earliest", _command(), on_assign)
    assert starts[("t", 1)] == 3
    assert starts[("t", 0)] == 40
