"""Seeded random sequences of inputs against the share member, with invariants after every step.

A fake coordinator answers heartbeats (assignments, errors, transport failures, late answers) and
a fake data plane carries out StopAndFlush / ApplyShareAssignment at once but answers at random
later times, possibly never. Whatever happens, the member must keep its books in step with the
data plane, heartbeat only where its state says so, and stay silent once shut down.
"""

from __future__ import annotations

import random

import pytest
from share_rig import BAR, FOO, parts

from consumer.member.commands import FindCoordinator, ReportError, ShutDown
from consumer.member.errors import FatalMemberError, MemberStateError
from consumer.member.inputs import (
    CoordinatorChanged,
    CoordinatorLost,
    HeartbeatTransportFailed,
    PollIntervalExpired,
    Unsubscribed,
)
from consumer.member.partitions import TopicIdPartition
from consumer.member.states import Heartbeats
from consumer.share import (
    SHARE_STATES,
    ApplyShareAssignment,
    AppPolled,
    CloseRequested,
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
    Subscribed,
)

UNIVERSE = sorted(parts(FOO, 0, 1, 2) | parts(BAR, 0), key=lambda t: (str(t.topic_id), t.partition))
ERRORS = (14, 15, 16, 25, 110, 29, 69, 30, 35, 42, 81, 57)


class World:
    """One member, a fake coordinator and a fake data plane."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        config = ShareMemberConfig(group_id="g", max_poll_interval_ms=20_000)
        self.member = ShareMember(config, random.Random(seed))
        self.now = 0
        self.epoch = 0
        self.heartbeats: list[SendShareHeartbeat] = []
        self.data_plane_answers: list[ShareInput] = []
        self.fetching: set[TopicIdPartition] = set()
        self.shut_down = False

    def run(self, commands: list[ShareCommand], state_before: ShareState) -> None:
        for command in commands:
            assert not self.shut_down, f"{command} after ShutDown"
            match command:
                case SendShareHeartbeat(request=request):
                    if not command.is_leave:
                        assert SHARE_STATES[state_before].heartbeats is not Heartbeats.NONE or (
                            SHARE_STATES[self.member.state].heartbeats is not Heartbeats.NONE
                        )
                        self.heartbeats.append(command)
                    else:
                        assert request.member_epoch == -1
                case StopAndFlush(request_id=request_id, partitions=partitions):
                    assert set(partitions) <= self.fetching, "stops only what is fetched"
                    self.fetching -= set(partitions)
                    self.data_plane_answers.append(StoppedAndFlushed(request_id))
                case ApplyShareAssignment(request_id=request_id, assigned=assigned):
                    self.fetching = set(assigned)
                    self.data_plane_answers.append(ShareAssignmentApplied(request_id))
                case ShutDown():
                    self.shut_down = True
                case FindCoordinator() | ReportError():
                    pass

    def feed(self, event: ShareInput) -> None:
        before = self.member.state
        try:
            commands = self.member.handle(event, self.now)
        except (FatalMemberError, MemberStateError):
            assert isinstance(event, Subscribed)
            return
        self.run(commands, before)

    def answer_heartbeat(self) -> ShareInput:
        sent = self.heartbeats.pop(self.rng.randrange(len(self.heartbeats)))
        roll = self.rng.random()
        if roll < 0.15:
            return ShareHeartbeatFailed(sent.request_id, self.rng.choice(ERRORS))
        if roll < 0.2:
            return HeartbeatTransportFailed(sent.request_id, "reset")
        self.epoch = max(self.epoch + self.rng.choice((0, 1)), 1)
        assignment = None
        if self.rng.random() < 0.5:
            assignment = frozenset(self.rng.sample(UNIVERSE, self.rng.randrange(len(UNIVERSE) + 1)))
        return ShareHeartbeatSucceeded(sent.request_id, self.epoch, 500, assignment)

    def step(self) -> None:
        rng = self.rng
        choice = rng.random()
        if choice < 0.3:
            self.now += rng.choice((1, 100, 500, 2_000, 25_000))
            before = self.member.state
            commands, _deadline = self.member.poll(self.now)
            self.run(commands, before)
            return
        if choice < 0.55 and self.heartbeats:
            self.feed(self.answer_heartbeat())
        elif choice < 0.75 and self.data_plane_answers:
            self.feed(self.data_plane_answers.pop(rng.randrange(len(self.data_plane_answers))))
        else:
            self.feed(
                rng.choice(
                    [
                        Subscribed(("foo",)),
                        Subscribed(("foo", "bar")),
                        Unsubscribed(),
                        AppPolled(),
                        AppPolled(),
                        PollIntervalExpired(),
                        CoordinatorChanged(1),
                        CoordinatorChanged(1),
                        CoordinatorLost("down", rng.choice((None, 30, 69))),
                        CloseRequested() if rng.random() < 0.1 else AppPolled(),
                    ]
                )
            )

    def check(self) -> None:
        member = self.member
        assert member.state in SHARE_STATES
        assert member.assignment.fetching == frozenset(self.fetching), "books = data plane"
        if member.assignment.round is None:
            assert member.owned <= member.assignment.fetching, "owned only what is fetched"
        if member.state is ShareState.STABLE:
            assert member.owned == member.target
        if member.is_shut_down:
            assert member.poll(self.now) == ([], None)


@pytest.mark.parametrize("seed", range(60))
def test_random_sequences_keep_the_invariants(seed: int) -> None:
    world = World(seed)
    for _ in range(400):
        world.step()
        world.check()
