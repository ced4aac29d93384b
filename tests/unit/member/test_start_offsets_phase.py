"""The reset policy's start offsets: looked up next to the round's ApplyAssignment, not waited
for (the ack does not wait for ListOffsets, as Java's member acknowledges before positions are
reset); the answer becomes StartFetching for the application thread."""

from __future__ import annotations

from member_rig import FOO, NAMES, MemberRig

from consumer.member import (
    ApplyAssignment,
    AssignmentApplied,
    CallbackCompleted,
    CommittedOffsetsFetched,
    FetchCommittedOffsets,
    HeartbeatFailed,
    InvokeOnAssign,
    InvokeOnLost,
    ListStartOffsets,
    MemberState,
    MetadataResolved,
    ResetPolicy,
    SendHeartbeat,
    StartFetching,
    StartOffsetsListed,
    TopicPartition,
)
from consumer.member.rules import RoundPhase

FOO_0, FOO_1, FOO_2 = (TopicPartition("foo", p) for p in range(3))


def fetched(r: MemberRig, offsets: dict[TopicPartition, int | None]) -> None:
    """Join with foo 0-2 and answer the round's OffsetFetch with ``offsets``."""
    r.respond(r.join(), 1, {FOO: (0, 1, 2)})
    r.handle(MetadataResolved(NAMES))
    r.handle(CommittedOffsetsFetched(r.last(FetchCommittedOffsets).request_id, offsets))


def test_partitions_without_a_committed_offset_are_listed_next_to_the_assignment() -> None:
    r = MemberRig(auto_offset_reset="earliest", isolation_level="read_uncommitted")
    fetched(r, {FOO_0: 40, FOO_1: None, FOO_2: None})
    listing = r.last(ListStartOffsets)
    assert listing.partitions == (FOO_1, FOO_2)
    assert (listing.policy, listing.read_committed) == (ResetPolicy.EARLIEST, False)
    apply = r.last(ApplyAssignment)
    assert apply.committed_offsets == {FOO_0: 40, FOO_1: None, FOO_2: None}
    assert (apply.awaiting_start, apply.start_request_id) == ((FOO_1, FOO_2), listing.request_id)
    assert r.member.assignment.round is not None
    assert r.member.assignment.round.phase is RoundPhase.ASSIGNING


def test_the_ack_does_not_wait_for_the_start_offsets() -> None:
    r = MemberRig(auto_offset_reset="earliest")
    fetched(r, {})
    apply, on_assign = r.last(ApplyAssignment), r.last(InvokeOnAssign)
    r.handle(AssignmentApplied(apply.request_id))
    r.handle(CallbackCompleted(on_assign.request_id))
    assert r.member.state is MemberState.ACK_ASSIGNMENT  # no StartOffsetsListed yet
    assert r.member.assignment.round is None


def test_the_answer_becomes_start_fetching_with_absolute_offsets_only() -> None:
    r = MemberRig(auto_offset_reset="latest", isolation_level="read_committed")
    fetched(r, {})
    listing = r.last(ListStartOffsets)
    assert (listing.policy, listing.read_committed) == (ResetPolicy.LATEST, True)
    assert listing.partitions == (FOO_0, FOO_1, FOO_2)
    # FOO_1's leader never answered; a negative offset is not an absolute one: both start at
    # the reset policy's logical offset (the application thread's choice).
    r.handle(StartOffsetsListed(listing.request_id, {FOO_0: 3, FOO_2: -1}))
    assert r.last(StartFetching) == StartFetching(listing.request_id, {FOO_0: 3})


def test_everything_committed_or_policy_error_lists_nothing() -> None:
    committed = MemberRig(auto_offset_reset="earliest")
    fetched(committed, {FOO_0: 1, FOO_1: 2, FOO_2: 3})
    error_policy = MemberRig(auto_offset_reset="error")
    fetched(error_policy, {})
    for r in (committed, error_policy):
        assert not r.all(ListStartOffsets)
        apply = r.last(ApplyAssignment)
        assert (apply.awaiting_start, apply.start_request_id) == ((), None)


def test_a_late_answer_after_a_fence_is_forwarded_with_its_own_request_id() -> None:
    """The member is fenced before the lookup answers and rejoins; the next round asks again
    under a new request id. The first answer is still forwarded, under its own id, which the
    application thread no longer waits for (``tests/unit/client/test_assignment_start_offsets``)."""
    r = MemberRig(auto_offset_reset="latest")
    fetched(r, {})
    stale = r.last(ListStartOffsets)
    r.advance(5_000)
    heartbeat = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatFailed(heartbeat.request_id, 110))  # FENCED_MEMBER_EPOCH
    for lost in r.all(InvokeOnLost):  # the partitions were handed out: on_lost, then rejoin
        r.handle(CallbackCompleted(lost.request_id))
    r.poll()
    rejoin = r.last(SendHeartbeat)
    assert rejoin.request.member_epoch == 0
    r.respond(rejoin, 3, {FOO: (0, 1, 2)})
    r.handle(MetadataResolved(NAMES))
    r.handle(CommittedOffsetsFetched(r.last(FetchCommittedOffsets).request_id, {}))
    fresh = r.last(ListStartOffsets)
    assert fresh.request_id != stale.request_id
    assert r.last(ApplyAssignment).start_request_id == fresh.request_id
    r.handle(StartOffsetsListed(stale.request_id, {FOO_0: 999}))
    assert r.last(StartFetching) == StartFetching(stale.request_id, {FOO_0: 999})
