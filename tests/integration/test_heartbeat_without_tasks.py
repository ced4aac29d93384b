"""An idle member's heartbeats go out without a task, against a real broker: the loop's timer
turn writes the frame and the answer is fed from the socket's read callback. When the
coordinator's session is lost under it, the member reconnects (the task-free path only uses an
open session: whatever request comes first opens a new one the awaited way), keeps its
membership, and its heartbeats go task-free again on the new session. When a heartbeat's answer
never comes, its timeout runs the loop's next turn (the turn that sent it armed no timer of its
own when nothing else was due before that).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from consumer import Consumer
from consumer._runtime.answer_waiter import AnswerWaiter
from consumer._runtime.background import BackgroundRuntime
from consumer._runtime.group_requests import GroupRequests
from consumer._runtime.session import Session
from consumer._wire import ApiKey, peek_correlation_id
from consumer.member import SendHeartbeat
from tests.support import wait_until

pytestmark = pytest.mark.integration


class HeartbeatPaths:
    """How many heartbeats went out each way (``soon``: task-free; ``task``: awaited)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: Counter[str] = Counter()
        #: When each heartbeat went out (``time.monotonic()``), either way.
        self.times: list[float] = []

    def count(self, path: str) -> int:
        with self.lock:
            return self.sent[path]

    def add(self, path: str) -> None:
        with self.lock:
            self.sent[path] += 1
            self.times.append(time.monotonic())

    def sent_after(self, moment: float) -> list[float]:
        """When the heartbeats sent after ``moment`` went out."""
        with self.lock:
            return [at for at in self.times if at > moment]

    def __str__(self) -> str:
        with self.lock:
            return str(dict(self.sent))


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> HeartbeatPaths:
    recorded = HeartbeatPaths()
    heartbeat = GroupRequests.heartbeat
    heartbeat_soon = GroupRequests.heartbeat_soon

    async def counting_heartbeat(self: GroupRequests, command: SendHeartbeat, *a: Any) -> Any:
        recorded.add("task")
        return await heartbeat(self, command, *a)

    def counting_heartbeat_soon(self: GroupRequests, command: SendHeartbeat, *a: Any) -> bool:
        sent = heartbeat_soon(self, command, *a)
        if sent:
            recorded.add("soon")
        return sent

    monkeypatch.setattr(GroupRequests, "heartbeat", counting_heartbeat)
    monkeypatch.setattr(GroupRequests, "heartbeat_soon", counting_heartbeat_soon)
    return recorded


def sessions(runtime: BackgroundRuntime) -> list[Session]:
    """The broker sessions of ``runtime``'s connections now."""
    found = [c._session for c in list(runtime._cluster._connections.values())]
    return [session for session in found if session is not None]


def abort_sessions(runtime: BackgroundRuntime) -> list[Session]:
    """Reset every open broker session of ``runtime`` from its loop (as a dropped link would);
    returns them once aborted."""
    done = threading.Event()
    aborted: list[Session] = []

    def abort() -> None:
        for session in sessions(runtime):
            if session.transport is not None:
                session.transport.abort()
                aborted.append(session)
        done.set()

    assert runtime._loop is not None
    runtime._loop.call_soon_threadsafe(abort)
    assert done.wait(5.0), "the loop ran the abort"
    return aborted


def polled_until(consumer: Consumer, predicate: Callable[[], bool]) -> Callable[[], bool]:
    """A condition for ``wait_until`` that polls ``consumer`` once before each check."""

    def check() -> bool:
        consumer.poll(0.1)
        return predicate()

    return check


@pytest.mark.timeout(180)
def test_stable_heartbeats_need_no_task_and_survive_a_lost_connection(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    paths: HeartbeatPaths,
) -> None:
    topic = create_topic(partitions=2)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": unique_name("group")})
    assigned: list[list[TopicPartition]] = []
    try:
        consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.append(parts))

        wait_until(
            polled_until(consumer, lambda: bool(assigned) and consumer.state == "STABLE"),
            30.0,
            "STABLE with both partitions",
        )
        member_id, epoch = consumer.memberid(), consumer.member_epoch
        soon, task = paths.count("soon"), paths.count("task")
        wait_until(
            polled_until(consumer, lambda: paths.count("soon") >= soon + 6),
            20.0,
            "six task-free heartbeats while STABLE (the broker's interval is 0.5 s)",
            lambda: str(paths),
        )
        assert paths.count("task") == task, f"no awaited heartbeat while STABLE: {paths}"
        answered = consumer.metrics()["heartbeat-total"]
        assert answered >= soon + 5, "the task-free answers reach the member's metrics"

        runtime = consumer._runtime
        assert isinstance(runtime, BackgroundRuntime)
        aborted = abort_sessions(runtime)
        assert aborted, "the coordinator's session was open"
        wait_until(
            polled_until(consumer, lambda: all(not s.alive for s in aborted)),
            10.0,
            "the aborted sessions noticed the loss",
        )
        soon = paths.count("soon")
        wait_until(
            polled_until(
                consumer,
                lambda: (
                    paths.count("soon") >= soon + 4
                    and any(s not in aborted and s.alive for s in sessions(runtime))
                ),
            ),
            20.0,
            "task-free heartbeats again, on a new session",
            lambda: str(paths),
        )
        assert consumer.state == "STABLE"
        assert (consumer.memberid(), consumer.member_epoch) == (member_id, epoch)
        assert sorted(tp.partition for tp in consumer.assignment()) == [0, 1]
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_a_heartbeat_answer_that_never_comes_runs_the_next_turn_at_its_timeout(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    paths: HeartbeatPaths,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without auto-commit, a STABLE member's only deadline while a heartbeat is in flight is
    # max.poll.interval.ms away: the sending turn arms no timer, so the next turn must come from
    # the answer or, when it is lost, from its timeout (two intervals, at least 3 s).
    topic = create_topic(partitions=1)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": unique_name("group"),
            "enable.auto.commit": False,
        }
    )
    lost_at: list[float] = []
    deliver = Session._deliver

    def losing_one_heartbeat_answer(self: Session, frame: bytes) -> None:
        waiter = self.pending.get(peek_correlation_id(frame))
        if (
            lose.is_set()
            and not lost_at
            and isinstance(waiter, AnswerWaiter)
            and int(waiter._request.__api_key__) == ApiKey.CONSUMER_GROUP_HEARTBEAT
        ):
            lost_at.append(time.monotonic())  # left pending: only its timeout answers it
            return
        deliver(self, frame)

    lose = threading.Event()
    monkeypatch.setattr(Session, "_deliver", losing_one_heartbeat_answer)
    assigned: list[list[TopicPartition]] = []
    try:
        consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.append(parts))

        wait_until(
            polled_until(consumer, lambda: bool(assigned) and consumer.state == "STABLE"),
            30.0,
            "STABLE with its partition",
        )
        soon = paths.count("soon")
        wait_until(
            polled_until(consumer, lambda: paths.count("soon") >= soon + 2),
            10.0,
            "task-free heartbeats while STABLE",
            lambda: str(paths),
        )
        lose.set()
        wait_until(
            polled_until(consumer, lambda: bool(lost_at)), 10.0, "a heartbeat answer was lost"
        )
        wait_until(
            polled_until(consumer, lambda: len(paths.sent_after(lost_at[0])) >= 3),
            20.0,
            "heartbeats again after the lost answer's timeout",
            lambda: str(paths),
        )
        first_after_s = paths.sent_after(lost_at[0])[0] - lost_at[0]
        # The answer's timeout is 3 s after the send (the answer came a few ms after it): no
        # heartbeat goes out before it (nothing else runs a turn), and one soon after it.
        assert 2.5 <= first_after_s <= 10.0, f"first heartbeat {first_after_s:.2f} s after the loss"
        assert consumer.state == "STABLE"
        assert [tp.partition for tp in consumer.assignment()] == [0]
        runtime = consumer._runtime
        assert isinstance(runtime, BackgroundRuntime)
        assert runtime.failure is None
    finally:
        consumer.close()
