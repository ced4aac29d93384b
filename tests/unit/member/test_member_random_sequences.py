"""Hypothesis drives one member with random inputs (answers to its own commands, errors, time,
subscription changes) and checks the invariants after every step:

* the member epoch never decreases, except to 0 (fencing, rejoin, leaving, staleness, fatal);
* nothing is assigned before its revocation completed: while an on_revoke is pending (and no
  on_lost superseded it) the only ApplyAssignment allowed is a release of everything;
* every acknowledgement (a heartbeat built in ACK_ASSIGNMENT) lists exactly the owned partitions,
  which are exactly what the data plane was last told to hold.
"""

from __future__ import annotations

import contextlib
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from member_rig import BAR, FOO, NAMES, MemberRig

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
    FindCoordinator,
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
    RevocationCompleted,
    SendHeartbeat,
    StartFetching,
    StartOffsetsListed,
    StopFetching,
    Subscribed,
    TopicPartition,
    Unsubscribed,
)
from consumer.member.partitions import flatten_assignment

assignments = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from([FOO, BAR]),
        st.lists(st.integers(0, 3), max_size=4, unique=True).map(lambda ps: tuple(sorted(ps))),
        max_size=2,
    ),
)
heartbeat_ok = st.tuples(st.just("hb-ok"), st.integers(0, 2), assignments)
interval = st.tuples(st.just("time"), st.just(5_000))
answer_all = st.tuples(st.just("answer"), st.just("all"))
metadata_all = st.tuples(st.just("metadata"), st.just("all"))
common = [heartbeat_ok, interval, answer_all, metadata_all] * 4
rare = [
    st.tuples(st.just("hb-error"), st.sampled_from([14, 16, 25, 29, 110, 69, 30])),
    st.tuples(st.just("hb-transport")),
    st.tuples(st.just("answer"), st.sampled_from(["revoke", "callbacks", "data"])),
    st.tuples(st.just("commit"), st.sampled_from([0, 0, 113, 16, 29])),
    st.tuples(st.just("fetch"), st.sampled_from([0, 0, 113, 15])),
    st.tuples(st.just("list"), st.sampled_from(["found", "some", "failed"])),
    st.tuples(st.just("metadata"), st.sampled_from(["foo", "none"])),
    st.tuples(st.just("time"), st.sampled_from([1, 100, 1_000, 60_000, 300_000])),
    st.tuples(st.just("poll-app")),
    st.tuples(st.just("subscribe"), st.sampled_from([("foo",), ("foo", "bar"), ()])),
    st.tuples(st.just("unsubscribe")),
    st.tuples(st.just("close")),
    st.tuples(st.just("coordinator"), st.booleans()),
    st.tuples(st.just("user-commit")),
]
steps = st.lists(st.one_of(*common, *rare), min_size=5, max_size=80)


class Checker:
    def __init__(self, r: MemberRig) -> None:
        self.r = r
        self.epoch = 0
        self.data_plane: set[TopicPartition] = set()
        self.revoking: dict[int, set[TopicPartition]] = {}
        self.lookups: set[int] = set()  # start lookups announced (assignment or follow-up)
        self.seen = 0

    def check(self, state_before: MemberState) -> None:
        member = self.r.member
        assert member.member_epoch >= self.epoch or member.member_epoch == 0
        self.epoch = member.member_epoch
        for command in self.r.commands[self.seen :]:
            if isinstance(command, InvokeOnRevoke):
                self.revoking[command.request_id] = set(command.partitions)
            elif isinstance(command, InvokeOnLost):
                self.revoking.clear()
            elif isinstance(command, ApplyAssignment):
                # While a revocation is pending only a release (nothing assigned) may happen.
                assert not self.revoking or command.assigned == (), (self.revoking, command)
                # Every added partition waits for its committed offset, and only those.
                assert command.awaiting_start == command.added, command
                assert (command.start_request_id is None) == (not command.added), command
                self.data_plane = set(command.assigned)
                if command.start_request_id is not None:
                    self.lookups.add(command.start_request_id)
            elif isinstance(command, StartFetching):
                # A start answers a lookup an assignment (or an earlier start) announced.
                assert command.request_id in self.lookups, command
                if command.then_request_id is not None:
                    self.lookups.add(command.then_request_id)
            elif isinstance(command, ListStartOffsets):
                # The reset policy's lookup is only the follow-up a StartFetching named.
                assert command.request_id in self.lookups, command
            elif (
                isinstance(command, SendHeartbeat)
                and state_before is MemberState.ACK_ASSIGNMENT
                and command.request.topic_partitions is not None
                and not command.is_leave
            ):
                acked = {
                    TopicPartition(NAMES[e.topic_id], p)
                    for e in command.request.topic_partitions
                    for p in e.partitions
                }
                # An ack reports what is owned (and fetched) plus what the member may still hand
                # out: the target's partitions, even those whose topic name is not known yet.
                target = {
                    TopicPartition(NAMES[item.topic_id], item.partition)
                    for item in member.assignment.target
                }
                assert set(member.owned_partitions) == self.data_plane
                assert acked == set(member.owned_partitions) | target
        self.seen = len(self.r.commands)

    def completed_revocation(self, request_id: int) -> None:
        self.revoking.pop(request_id, None)


def pending(r: MemberRig, kind: type) -> list[Command]:
    return [c for c in r.commands if isinstance(c, kind)]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, seed=st.integers(0, 100), start_stable=st.booleans())
def test_random_inputs_keep_the_invariants(
    steps: list[tuple[object, ...]], seed: int, start_stable: bool
) -> None:
    r = MemberRig(seed=seed)
    if start_stable:
        r.stable({FOO: (0, 1, 2)})
    else:
        r.join()
    checker = Checker(r)
    checker.check(r.member.state)
    checker.data_plane = set(r.member.owned_partitions)
    answered: set[int] = {id(c) for c in r.commands if start_stable}
    for step in steps:
        state_before = r.member.state
        event = _event_for(step, r, answered, checker)
        if event is not None:
            with contextlib.suppress(MemberError):
                r.handle(event)
        if step[0] == "time":
            r.advance(int(step[1]))  # type: ignore[call-overload]
        checker.check(state_before)
        state_before = r.member.state
        r.poll()
        checker.check(state_before)


def _first_unanswered(r: MemberRig, kind: type, answered: set[int]) -> Command | None:
    for command in pending(r, kind):
        key = id(command)
        if key not in answered:
            answered.add(key)
            return command
    return None


def _event_for(  # noqa: C901
    step: tuple[object, ...], r: MemberRig, answered: set[int], checker: Checker
) -> Input | None:
    kind = step[0]
    last_hb = None
    if kind in ("hb-ok", "hb-error", "hb-transport"):
        last_hb = _first_unanswered(r, SendHeartbeat, answered)
        if last_hb is None:  # let the interval elapse so that a heartbeat goes out
            due = r.deadline()
            if due is not None and due <= r.now + 5_000:
                r.now = max(r.now, due)
                r.poll()
            last_hb = _first_unanswered(r, SendHeartbeat, answered)
    if kind == "hb-ok" and isinstance(last_hb, SendHeartbeat):
        assignment = step[2]
        epoch = max(r.member.member_epoch, 0) + int(step[1])  # type: ignore[call-overload]
        target = None if assignment is None else flatten_assignment(assignment)  # type: ignore[arg-type]
        return HeartbeatSucceeded(last_hb.request_id, epoch, 5_000, target)
    if kind == "hb-error" and isinstance(last_hb, SendHeartbeat):
        return HeartbeatFailed(last_hb.request_id, int(step[1]))  # type: ignore[call-overload]
    if kind == "hb-transport" and isinstance(last_hb, SendHeartbeat):
        return HeartbeatTransportFailed(last_hb.request_id)
    if kind == "answer":
        what = step[1]
        if what == "all":
            fetch = _first_unanswered(r, FetchCommittedOffsets, answered)
            if isinstance(fetch, FetchCommittedOffsets):
                return CommittedOffsetsFetched(fetch.request_id, dict.fromkeys(fetch.partitions))
            listing = _first_unanswered(r, ListStartOffsets, answered)
            if isinstance(listing, ListStartOffsets):
                return StartOffsetsListed(listing.request_id, dict.fromkeys(listing.partitions, 0))
            commit = _first_unanswered(r, CommitOffsets, answered)
            if isinstance(commit, CommitOffsets):
                return CommitCompleted(commit.request_id, dict.fromkeys(commit.offsets, 0))
        if what in ("all", "revoke"):
            cmd = _first_unanswered(r, InvokeOnRevoke, answered)
            if isinstance(cmd, InvokeOnRevoke):
                checker.completed_revocation(cmd.request_id)
                return RevocationCompleted(cmd.request_id)
        if what in ("all", "callbacks"):
            cmd = _first_unanswered(r, InvokeOnAssign, answered) or _first_unanswered(
                r, InvokeOnLost, answered
            )
            if isinstance(cmd, InvokeOnAssign | InvokeOnLost):
                return CallbackCompleted(cmd.request_id)
        if what in ("all", "data"):
            stop = _first_unanswered(r, StopFetching, answered)
            if isinstance(stop, StopFetching):
                return FetchingStopped(stop.request_id)
            cmd = _first_unanswered(r, ApplyAssignment, answered)
            if isinstance(cmd, ApplyAssignment):
                return AssignmentApplied(cmd.request_id)
        return None
    if kind == "commit":
        cmd = _first_unanswered(r, CommitOffsets, answered)
        if isinstance(cmd, CommitOffsets):
            return CommitCompleted(cmd.request_id, dict.fromkeys(cmd.offsets, step[1]))  # type: ignore[arg-type]
        return None
    if kind == "fetch":
        cmd = _first_unanswered(r, FetchCommittedOffsets, answered)
        if isinstance(cmd, FetchCommittedOffsets):
            return CommittedOffsetsFetched(
                cmd.request_id,
                dict.fromkeys(cmd.partitions, 4),
                int(step[1]),  # type: ignore[call-overload]
            )
        return None
    if kind == "list":
        cmd = _first_unanswered(r, ListStartOffsets, answered)
        if isinstance(cmd, ListStartOffsets):
            # All found, the first only (the others' lookups failed), or none found.
            count = {"found": len(cmd.partitions), "some": 1, "failed": 0}[step[1]]  # type: ignore[index]
            return StartOffsetsListed(cmd.request_id, dict.fromkeys(cmd.partitions[:count], 7))
        return None
    if kind == "metadata":
        cmd = _first_unanswered(r, FetchMetadata, answered)
        names: dict[uuid.UUID, str] = {
            "all": NAMES,
            "foo": {FOO: "foo"},
            "none": {},
        }[step[1]]  # type: ignore[index]
        return MetadataResolved(names) if cmd is not None else None
    if kind == "poll-app":
        return AppPolled({tp: 10 for tp in r.member.owned_partitions})
    if kind == "subscribe":
        return Subscribed(topic_names=step[1])  # type: ignore[arg-type]
    if kind == "unsubscribe":
        return Unsubscribed()
    if kind == "close":
        return CloseRequested()
    if kind == "coordinator":
        if _first_unanswered(r, FindCoordinator, answered) is not None or step[1]:
            return CoordinatorChanged(1)
        return CoordinatorLost()
    if kind == "user-commit":
        return CommitRequested(token=len(r.commands))
    return None
