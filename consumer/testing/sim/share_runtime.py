"""The simulated background of one :class:`~consumer.testing.sim.FakeShareConsumer`.

It does what the real share consumer's background loop (:mod:`consumer._share_runtime.loop`) does,
in the test's thread and on the simulated clock: feed the application's events to the real
:class:`~consumer.share.ShareMember`, run its timers, and carry out its commands: heartbeats go to
the simulated share coordinator (the answer is fed back at once, as the real loop does after
awaiting the request), ``StopAndFlush`` and ``ApplyShareAssignment`` change which partitions the
consumer fetches. Faults: heartbeats dropped for a while (the coordinator connection is broken;
fetching and acknowledging go on, since KIP-932 does not fence the data plane) and a crash.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence

from consumer._share_runtime.metrics import ShareMetrics
from consumer.member.inputs import CoordinatorChanged, CoordinatorLost, HeartbeatTransportFailed
from consumer.member.partitions import TopicIdPartition, TopicPartition
from consumer.share import (
    ApplyShareAssignment,
    SendShareHeartbeat,
    ShareAssignmentApplied,
    ShareCommand,
    ShareHeartbeatFailed,
    ShareHeartbeatSucceeded,
    ShareInput,
    ShareMember,
    ShareMemberConfig,
    ShareState,
    StopAndFlush,
    StoppedAndFlushed,
)
from consumer.share.commands import FindCoordinator, ReportError, ShutDown
from consumer.testing.sim.share_coordinator import ShareCoordinatorSim

__all__ = ["SimShareRuntime"]

#: Bound on member steps at one instant (a member that never settles is a bug worth seeing).
_MAX_STEPS = 10_000
_COORDINATOR_ID = 1


class SimShareRuntime:
    """One share member and its simulated background loop (see the module docstring).

    Args:
        config: the member's settings.
        seed: seeds the member's random source (member id, backoff jitter).
        coordinator: the group's simulated coordinator.
        now_ms: reads the simulated clock.
        on_stop: told the partitions of each ``StopAndFlush`` (the consumer flushes their
            pending acknowledgements).
    """

    def __init__(
        self,
        config: ShareMemberConfig,
        seed: int,
        coordinator: ShareCoordinatorSim,
        now_ms: Callable[[], int],
        on_stop: Callable[[Sequence[TopicPartition]], None],
    ) -> None:
        self.member = ShareMember(config, random.Random(seed))
        #: ``FakeShareConsumer.metrics()``: fed as the real loop feeds ``ShareConsumer``'s.
        self.metrics = ShareMetrics(now_ms)
        self._coordinator = coordinator
        self._now_ms = now_ms
        self._on_stop = on_stop
        self._inbox: deque[ShareInput] = deque()
        self._dirty = True
        #: The partitions the data plane fetches (by name), in the order assigned.
        self.fetching: tuple[TopicPartition, ...] = ()
        self.next_deadline_ms: int | None = None
        self.finished = False
        self.crashed = False
        #: A fatal error the member reported (raised by the consumer's next call).
        self.failure: ReportError | None = None
        #: Non-fatal errors the member reported, in order.
        self.errors: list[ReportError] = []
        #: Heartbeats are lost until this time (None: they go through).
        self.heartbeats_dropped_until_ms: int | None = None

    @property
    def state(self) -> ShareState:
        """The member's state."""
        return self.member.state

    def submit(self, event: ShareInput) -> None:
        """Queue an application event for the member (handled by the next :meth:`run_due`)."""
        if not self.finished:
            self._inbox.append(event)

    def crash(self) -> None:
        """Stop dead: no more heartbeats, no leave."""
        self.finished = True
        self.crashed = True
        self._inbox.clear()

    def run_due(self) -> bool:
        """Handle queued events and run the member's timers at the current instant; returns
        whether anything happened."""
        if self.finished:
            return False
        now = self._now_ms()
        did = False
        while self._inbox and not self.finished:
            did = True
            self._dirty = True
            self._carry_out(self.member.handle(self._inbox.popleft(), now))
        for _ in range(_MAX_STEPS):
            deadline = self.next_deadline_ms
            if self.finished or not (self._dirty or (deadline is not None and deadline <= now)):
                return did
            self._dirty = False
            commands, self.next_deadline_ms = self.member.poll(now)
            if not commands:
                return did
            did = True
            self._carry_out(commands)
            self._dirty = True
        raise RuntimeError(f"the share member did not settle at {now} ms")  # pragma: no cover

    # --- commands ---------------------------------------------------------------------------

    def _carry_out(self, commands: list[ShareCommand]) -> None:
        pending = list(commands)
        self.metrics.state_is(self.member.state)
        while pending and not self.crashed:
            answer = self._execute(pending.pop(0))
            if answer is not None:
                pending += self.member.handle(answer, self._now_ms())
                self.metrics.state_is(self.member.state)

    def _execute(self, command: ShareCommand) -> ShareInput | None:
        match command:
            case FindCoordinator():
                if self._heartbeats_dropped():
                    return CoordinatorLost("the coordinator is unreachable (simulated)")
                return CoordinatorChanged(_COORDINATOR_ID)
            case SendShareHeartbeat(request_id=request_id, request=request):
                if self._heartbeats_dropped():
                    return HeartbeatTransportFailed(request_id, "heartbeat lost (simulated)")
                sent_ms = self._now_ms()
                self.metrics.heartbeat_sent()
                reply = self._coordinator.heartbeat(request, sent_ms)
                self.metrics.heartbeat_answered(sent_ms)
                if reply.error_code:
                    return ShareHeartbeatFailed(request_id, reply.error_code, reply.error_message)
                return ShareHeartbeatSucceeded(
                    request_id,
                    reply.member_epoch,
                    reply.heartbeat_interval_ms,
                    reply.assignment,
                    reply.member_id,
                )
            case StopAndFlush(request_id=request_id, partitions=partitions):
                stopped = self._named(partitions)
                self._on_stop(stopped)
                self.fetching = tuple(tp for tp in self.fetching if tp not in set(stopped))
                return StoppedAndFlushed(request_id)
            case ApplyShareAssignment(request_id=request_id, assigned=assigned):
                self.fetching = tuple(sorted(self._named(assigned), key=_order))
                self.metrics.assignment_applied(len(assigned))
                return ShareAssignmentApplied(request_id)
            case ReportError():
                if command.fatal:
                    self.failure = command
                else:
                    self.errors.append(command)
            case ShutDown():
                self.finished = True
        return None

    def _heartbeats_dropped(self) -> bool:
        until = self.heartbeats_dropped_until_ms
        return until is not None and self._now_ms() < until

    def _named(self, partitions: Sequence[TopicIdPartition]) -> list[TopicPartition]:
        names = self._coordinator.topic_names()
        return [
            TopicPartition(names[tp.topic_id], tp.partition)
            for tp in partitions
            if tp.topic_id in names
        ]


def _order(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)
