"""Fuzzing the sans-I/O member core with random and mutated inputs (no broker).

Claim: whatever arrives, in whatever order (answers to its own commands with mutated ids and
values, answers nobody asked for, unknown and extreme error codes, negative or huge epochs,
odd assignments, time jumps), ``Member.handle`` and ``Member.poll`` raise nothing but
:class:`consumer.member.MemberError` subclasses, and the member keeps a valid state.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.member import (
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
    CoordinatorChanged,
    CoordinatorLost,
    FetchCommittedOffsets,
    FetchingStopped,
    FetchMetadata,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    Input,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ListStartOffsets,
    Member,
    MemberConfig,
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
from consumer.member.partitions import flatten_assignment

pytestmark = pytest.mark.reliability

TOPICS = [uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)]
NAMES = {TOPICS[0]: "a", TOPICS[1]: "b"}  # the third id never resolves
ERROR_CODES = st.one_of(
    st.sampled_from([0, 3, 7, 13, 14, 15, 16, 22, 25, 27, 30, 42, 58, 69, 110, 111, 112, 113]),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
)
EPOCHS = st.one_of(st.integers(-3, 50), st.sampled_from([2**31 - 1, -(2**31)]))
PARTITIONS = st.lists(st.integers(-2, 40), max_size=6).map(tuple)
ASSIGNMENTS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(TOPICS), PARTITIONS, max_size=3).map(flatten_assignment),
)
TPS = st.builds(TopicPartition, st.sampled_from(["a", "b", "zz"]), st.integers(-1, 40))
OFFSETS = st.dictionaries(TPS, st.integers(-(2**63), 2**63 - 1), max_size=4)
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def answer(command: Command, draw: st.DrawFn) -> Input | None:
    """A (possibly mutated) answer to one of the member's own commands."""
    rid = getattr(command, "request_id", 0) + draw(st.sampled_from([0, 0, 0, 1, -1]))
    match command:
        case SendHeartbeat():
            kind = draw(st.sampled_from(["ok", "ok", "error", "transport"]))
            if kind == "ok":
                return HeartbeatSucceeded(
                    rid,
                    draw(EPOCHS),
                    draw(st.integers(-5, 10_000)),
                    draw(ASSIGNMENTS),
                    draw(st.none() | st.text(max_size=30)),
                )
            if kind == "error":
                return HeartbeatFailed(
                    rid, draw(ERROR_CODES), draw(st.none() | st.text(max_size=9))
                )
            return HeartbeatTransportFailed(rid, "fuzz")
        case StopFetching():
            return FetchingStopped(rid, draw(OFFSETS))
        case InvokeOnRevoke():
            return RevocationCompleted(rid, draw(st.none() | st.just("boom")))
        case InvokeOnAssign() | InvokeOnLost():
            return CallbackCompleted(rid, draw(st.none() | st.just("boom")))
        case ApplyAssignment():
            return AssignmentApplied(rid)
        case CommitOffsets():
            errors = {tp: draw(ERROR_CODES) for tp in command.offsets}
            return CommitCompleted(rid, errors, draw(ERROR_CODES))
        case FetchCommittedOffsets():
            offsets = {
                tp: draw(st.none() | st.integers(-(2**63), 2**63 - 1)) for tp in command.partitions
            }
            return CommittedOffsetsFetched(rid, offsets, draw(ERROR_CODES))
        case ListStartOffsets():
            listed = {
                tp: draw(st.integers(-(2**63), 2**63 - 1))
                for tp in command.partitions
                if draw(st.booleans())  # the others' lookups failed
            }
            return StartOffsetsListed(rid, listed)
        case FetchMetadata():
            known = {t: NAMES[t] for t in command.topic_ids if t in NAMES}
            return MetadataResolved(draw(st.just(known) | st.just({})))
        case _:
            return None


def unsolicited(draw: st.DrawFn) -> Input:
    """An input nobody asked for, with random ids and values."""
    rid = draw(st.integers(-5, 200))
    return draw(
        st.sampled_from(
            [
                AppPolled(draw(st.none() | OFFSETS)),
                Subscribed(topic_names=tuple(draw(st.lists(st.sampled_from("abz"), max_size=3)))),
                Subscribed(topic_regex=draw(st.sampled_from(["a.*", "(", "b"]))),
                Unsubscribed(),
                CommitRequested(rid, draw(st.none() | OFFSETS)),
                PollIntervalExpired(),
                CloseRequested(),
                CoordinatorChanged(draw(st.integers(-1, 3))),
                CoordinatorLost("fuzz"),
                MetadataResolved({TOPICS[2]: "c"}),
                HeartbeatSucceeded(rid, draw(EPOCHS), draw(st.integers(-5, 5000)), None),
                HeartbeatFailed(rid, draw(ERROR_CODES)),
                CommitCompleted(rid, {}, draw(ERROR_CODES)),
                CommittedOffsetsFetched(rid, {}, draw(ERROR_CODES)),
                StartOffsetsListed(rid, {}),
                FetchingStopped(rid),
                RevocationCompleted(rid),
                CallbackCompleted(rid),
                AssignmentApplied(rid),
            ]
        )
    )


def step(member: Member, event: Input, now: int) -> list[Command]:
    try:
        return member.handle(event, now)
    except MemberError:
        return []


@FUZZ
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_member_core_takes_any_input_sequence(data: st.DataObject, seed: int) -> None:
    config = MemberConfig(
        group_id="g",
        rebalance_timeout_ms=data.draw(st.integers(1, 60_000)),
        max_poll_interval_ms=data.draw(st.integers(1, 60_000)),
        auto_commit=data.draw(st.booleans()),
    )
    member = Member(config, random.Random(seed))
    now = 0
    pending: list[Command] = step(member, Subscribed(topic_names=("a", "b")), now)
    pending += step(member, AppPolled(), now)
    for _ in range(data.draw(st.integers(5, 60))):
        now += data.draw(st.sampled_from([0, 0, 1, 50, 500, 5_000, 70_000]))
        try:
            commands, deadline = member.poll(now)
        except MemberError:
            commands, deadline = [], None
        assert deadline is None or isinstance(deadline, int)
        pending += commands
        choice = data.draw(st.sampled_from(["answer", "answer", "answer", "unsolicited", "drop"]))
        if choice == "answer" and pending:
            command = pending.pop(data.draw(st.integers(0, len(pending) - 1)))
            event: Any = answer(command, data.draw)
            if event is not None:
                pending += step(member, event, now)
        elif choice == "unsolicited":
            pending += step(member, unsolicited(data.draw), now)
        elif pending:
            pending.pop(0)  # a lost answer
        assert isinstance(member.state, MemberState)
        assert isinstance(member.member_epoch, int)
        pending = pending[-40:]
