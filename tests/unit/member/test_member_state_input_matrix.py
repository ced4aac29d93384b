"""Every (state, input) pair has a defined outcome, and random input sequences keep invariants."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from member_rig import BAR, FOO, NAMES, MemberRig

from consumer.member import (
    RULES,
    ApplyAssignment,
    AppPolled,
    AssignmentApplied,
    CallbackCompleted,
    CloseRequested,
    Command,
    CommitCompleted,
    CommitOffsets,
    CommitRequested,
    CommittedOffsetsFetched,
    ConsumedOffsetsReported,
    CoordinatorChanged,
    CoordinatorLost,
    FetchCommittedOffsets,
    FetchingStopped,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    Input,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ListStartOffsets,
    MemberError,
    MemberState,
    MetadataResolved,
    PollIntervalExpired,
    RevocationCompleted,
    SendHeartbeat,
    StartOffsetsListed,
    StopFetching,
    Subscribed,
    TopicPartition,
    Unsubscribed,
)
from consumer.member.inputs import INPUT_TYPES
from consumer.member.partitions import flatten_assignment

S = MemberState
FOO_0 = TopicPartition("foo", 0)


def reach(state: MemberState) -> MemberRig:
    """Drive a fresh member into ``state`` through real inputs only."""
    r = MemberRig()
    if state is S.UNSUBSCRIBED:
        return r
    join = r.join()
    if state is S.JOINING:
        return r
    r.respond(join, 1, {FOO: (0, 1)})
    if state is S.RECONCILE_ASSIGNMENT:
        r.handle(MetadataResolved(NAMES))
        assert r.member.state is S.RECONCILE_ASSIGNMENT
        return r
    r.answer_everything()
    if state is S.STABLE:
        ack = r.last(SendHeartbeat)
        r.handle(HeartbeatSucceeded(ack.request_id, 1, 5_000))
        return r
    if state is S.ACK_ASSIGNMENT:
        r2 = MemberRig()
        r2.respond(r2.join(), 1, {FOO: (0,)})
        r2.handle(MetadataResolved(NAMES))
        for command in list(r2.commands):
            if isinstance(command, FetchCommittedOffsets):
                r2.handle(CommittedOffsetsFetched(command.request_id, {FOO_0: None}))
        r2.handle(StartOffsetsListed(r2.last(ListStartOffsets).request_id, {FOO_0: 0}))
        apply = r2.last(ApplyAssignment)
        r2.handle(AssignmentApplied(apply.request_id))
        r2.handle(CallbackCompleted(r2.last(InvokeOnAssign).request_id))
        assert r2.member.state is S.ACK_ASSIGNMENT
        return r2
    if state is S.FENCED:
        r.handle(HeartbeatFailed(r.last(SendHeartbeat).request_id, 110))  # fails the in-flight ack
        return r
    if state is S.UNSUBSCRIBING:
        r.handle(Unsubscribed())
        return r
    if state is S.STALE:
        r.advance(r.config.max_poll_interval_ms)
        r.poll()
        return r
    assert state is S.FATAL
    r.handle(HeartbeatFailed(r.last(SendHeartbeat).request_id, 30))
    return r


def sample_input(kind: type, r: MemberRig) -> Input:
    """An instance of input type ``kind`` that answers the member's latest matching command."""

    def last_id(command_type: type) -> int:
        found = [c for c in r.commands if isinstance(c, command_type)]
        return found[-1].request_id if found else 999  # type: ignore[attr-defined]

    samples: dict[type, Callable[[], Input]] = {
        Subscribed: lambda: Subscribed(topic_names=("foo", "bar")),
        Unsubscribed: Unsubscribed,
        AppPolled: lambda: AppPolled({FOO_0: 5}),
        ConsumedOffsetsReported: lambda: ConsumedOffsetsReported({FOO_0: 7}),
        CommitRequested: lambda: CommitRequested(token=1, offsets={FOO_0: 3}),
        PollIntervalExpired: PollIntervalExpired,
        CloseRequested: CloseRequested,
        FetchingStopped: lambda: FetchingStopped(last_id(StopFetching), {FOO_0: 9}),
        RevocationCompleted: lambda: RevocationCompleted(last_id(InvokeOnRevoke)),
        CallbackCompleted: lambda: CallbackCompleted(
            max(last_id(InvokeOnAssign), last_id(InvokeOnLost))
        ),
        AssignmentApplied: lambda: AssignmentApplied(last_id(ApplyAssignment)),
        HeartbeatSucceeded: lambda: HeartbeatSucceeded(
            last_id(SendHeartbeat), 2, 5_000, flatten_assignment({FOO: (1,), BAR: (0,)})
        ),
        HeartbeatFailed: lambda: HeartbeatFailed(last_id(SendHeartbeat), 110),
        HeartbeatTransportFailed: lambda: HeartbeatTransportFailed(last_id(SendHeartbeat)),
        CoordinatorChanged: lambda: CoordinatorChanged(2),
        CoordinatorLost: CoordinatorLost,
        MetadataResolved: lambda: MetadataResolved(NAMES),
        CommitCompleted: lambda: CommitCompleted(last_id(CommitOffsets), {FOO_0: 0}),
        CommittedOffsetsFetched: lambda: CommittedOffsetsFetched(
            last_id(FetchCommittedOffsets), {FOO_0: 1}
        ),
        StartOffsetsListed: lambda: StartOffsetsListed(last_id(ListStartOffsets), {FOO_0: 4}),
    }
    return samples[kind]()


def reachable(source: MemberState) -> set[MemberState]:
    """States reachable from ``source`` through at most three rows of the table."""
    seen = {source}
    frontier = {source}
    for _ in range(3):
        frontier = set().union(*(RULES.destinations(state) for state in frontier)) - seen
        seen |= frontier
    return seen


@pytest.mark.parametrize(("state", "kind"), list(itertools.product(S, INPUT_TYPES)))
def test_every_state_input_pair_has_a_defined_outcome(state: MemberState, kind: type) -> None:
    r = reach(state)
    assert r.member.state is state
    event = sample_input(kind, r)
    try:
        commands = r.handle(event)
    except MemberError:
        assert r.member.state is state  # a refused input changes nothing
        return
    assert all(isinstance(c, Command.__args__) for c in commands)  # type: ignore[attr-defined]
    commands, deadline = r.member.poll(r.now)
    assert deadline is None or deadline >= 0
    assert r.member.state in reachable(state)


def test_subscribing_a_fatal_member_raises_the_fatal_error() -> None:
    from consumer.member import FatalMemberError

    r = reach(S.FATAL)
    with pytest.raises(FatalMemberError) as caught:
        r.handle(Subscribed(topic_names=("foo",)))
    assert caught.value.error_code == 30
    assert caught.value.error_name == "GROUP_AUTHORIZATION_FAILED"
