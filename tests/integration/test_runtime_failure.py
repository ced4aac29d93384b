"""If the background loop dies, the application hears about it from poll(); nothing hangs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException

from consumer import Consumer, ConsumerError
from consumer._runtime.group_requests import GroupRequests
from consumer.member import SendHeartbeat

pytestmark = pytest.mark.integration


def poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.1)


def test_a_crash_in_the_background_loop_is_raised_from_the_next_poll(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(partitions=1)
    heartbeats_seen: list[int] = []
    original = GroupRequests.heartbeat

    async def heartbeat_then_crash(  # type: ignore[no-untyped-def]
        self: GroupRequests, command: SendHeartbeat, *args: object, **kwargs: object
    ):
        heartbeats_seen.append(command.request.member_epoch)
        if len(heartbeats_seen) >= 3:
            raise RuntimeError("injected bug in the runtime")
        return await original(self, command, *args, **kwargs)  # type: ignore[arg-type]

    original_soon = GroupRequests.heartbeat_soon

    def heartbeat_soon_then_crash(
        self: GroupRequests, command: SendHeartbeat, timeout_ms: int, on_answer: Any, *rest: Any
    ) -> bool:
        # The task-free path: the bug is injected where its answer is handled (a callback).
        heartbeats_seen.append(command.request.member_epoch)
        crash = len(heartbeats_seen) >= 3

        def answered(answer: Any) -> None:
            if crash:
                raise RuntimeError("injected bug in the runtime")
            on_answer(answer)

        return original_soon(self, command, timeout_ms, answered, *rest)

    monkeypatch.setattr(GroupRequests, "heartbeat", heartbeat_then_crash)
    monkeypatch.setattr(GroupRequests, "heartbeat_soon", heartbeat_soon_then_crash)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": unique_name("g")})
    try:
        consumer.subscribe([topic])
        with pytest.raises(KafkaException, match="background loop died") as caught:
            poll_for(consumer, 30)
        assert isinstance(caught.value, ConsumerError)
        assert "injected bug" in str(caught.value)
        # Every later poll raises the same error at once instead of blocking.
        started = time.monotonic()
        with pytest.raises(KafkaException, match="background loop died"):
            consumer.poll(10)
        assert time.monotonic() - started < 1.0
    finally:
        started = time.monotonic()
        consumer.close()
        assert time.monotonic() - started < 5.0, "close() after a crash must not hang"
