"""A single-member rig for the member core's unit tests (imported as a plain module)."""

from __future__ import annotations

import random
import uuid
from typing import Any, TypeVar

from consumer.member import (
    AppPolled,
    Command,
    CommitCompleted,
    CoordinatorChanged,
    FetchingStopped,
    FindCoordinator,
    HeartbeatSucceeded,
    Input,
    InvokeOnRevoke,
    Member,
    MemberConfig,
    SendHeartbeat,
    StopFetching,
    Subscribed,
    TopicPartition,
)
from consumer.member.partitions import flatten_assignment
from consumer.testing.sim.autopilot import Autopilot, answer_pending

FOO = uuid.UUID("00000000-0000-0000-0000-00000000f001")
BAR = uuid.UUID("00000000-0000-0000-0000-00000000ba42")
NAMES = {FOO: "foo", BAR: "bar"}

C = TypeVar("C")


class MemberRig:
    """Drives one Member by hand and remembers every command it emitted."""

    def __init__(self, config: MemberConfig | None = None, seed: int = 7, **overrides: Any) -> None:
        self.config = config or MemberConfig(group_id="g", **overrides)
        self.member = Member(config=self.config, random=random.Random(seed))
        self.now = 0
        self.commands: list[Command] = []
        self.known_topics: dict[uuid.UUID, str] = dict(NAMES)
        #: What the application had consumed when fetching stopped, reported in FetchingStopped.
        self.consumed: dict[TopicPartition, int] = {}

    def stop_done(self, offsets: dict[TopicPartition, int] | None = None) -> list[Command]:
        """Answer the latest StopFetching (with ``offsets``, or what ``consumed`` holds)."""
        stop = self.last(StopFetching)
        return self.handle(
            FetchingStopped(
                stop.request_id, offsets if offsets is not None else self.consumed_at_stop(stop)
            )
        )

    def consumed_at_stop(self, command: StopFetching) -> dict[TopicPartition, int]:
        """The consumed offsets of the stopped partitions (as the data plane would report)."""
        return {tp: self.consumed[tp] for tp in command.partitions if tp in self.consumed}

    def handle(self, event: Input) -> list[Command]:
        out = self.member.handle(event, self.now)
        self.commands += out
        return out

    def poll(self) -> list[Command]:
        out, _ = self.member.poll(self.now)
        self.commands += out
        return out

    def deadline(self) -> int | None:
        return self.member.poll(self.now)[1]

    def advance(self, delta_ms: int) -> None:
        self.now += delta_ms

    def last(self, kind: type[C]) -> C:
        for command in reversed(self.commands):
            if isinstance(command, kind):
                return command
        raise AssertionError(f"no {kind.__name__} emitted")

    def all(self, kind: type[C]) -> list[C]:
        return [c for c in self.commands if isinstance(c, kind)]

    def join(self, topics: tuple[str, ...] = ("foo",)) -> SendHeartbeat:
        """Subscribe, poll, find the coordinator; returns the join heartbeat."""
        self.handle(Subscribed(topic_names=topics))
        self.handle(AppPolled())
        assert any(isinstance(c, FindCoordinator) for c in self.poll())
        self.handle(CoordinatorChanged(1))
        out = self.poll()
        heartbeats = [c for c in out if isinstance(c, SendHeartbeat)]
        assert len(heartbeats) == 1
        return heartbeats[0]

    def respond(
        self,
        heartbeat: SendHeartbeat,
        epoch: int,
        assignment: dict[uuid.UUID, tuple[int, ...]] | None = None,
        interval_ms: int = 5_000,
    ) -> list[Command]:
        target = None if assignment is None else flatten_assignment(assignment)
        out = self.handle(HeartbeatSucceeded(heartbeat.request_id, epoch, interval_ms, target))
        return out + self.poll()

    def answer_everything(self, *, revoke: bool = True, commit_error: int = 0) -> None:
        """Answer every command that waits for an answer, like a well-behaved runtime and app."""
        pilot = Autopilot(
            topic_names=lambda c: {
                t: self.known_topics[t] for t in c.topic_ids if t in self.known_topics
            },
            commit=lambda c: CommitCompleted(c.request_id, dict.fromkeys(c.offsets, commit_error)),
            consumed_at_stop=self.consumed_at_stop,
        )

        def answer(command: Command) -> None:
            if isinstance(command, InvokeOnRevoke) and not revoke:
                return  # the application has not finished revoking
            event = pilot.answer(command)
            if event is not None:
                self.handle(event)

        answer_pending(self.commands, answer, after_round=self.poll)

    def stable(self, assignment: dict[uuid.UUID, tuple[int, ...]], epoch: int = 1) -> SendHeartbeat:
        """Join and reconcile ``assignment``; returns the ack heartbeat (member is STABLE)."""
        join = self.join(tuple(sorted({NAMES[t] for t in assignment} or {"foo"})))
        self.respond(join, epoch, assignment)
        self.answer_everything()
        ack = self.last(SendHeartbeat)
        assert ack.request_id != join.request_id
        self.handle(HeartbeatSucceeded(ack.request_id, epoch, 5_000, None))
        self.poll()
        return ack
