"""Start offsets off the ack path: the committed offsets are fetched next to the round's
ApplyAssignment and not waited for (the ack does not wait for OffsetFetch, nor for the reset
policy's ListOffsets, as Java's member acknowledges before it initialises positions). The fetch's
end becomes StartFetching for the application thread, with the reset policy's lookup of the
partitions with nothing committed as its follow-up."""

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


def assigned(r: MemberRig) -> tuple[ApplyAssignment, FetchCommittedOffsets]:
    """Join with foo 0-2: the round's ApplyAssignment and the fetch sent with it."""
    r.respond(r.join(), 1, {FOO: (0, 1, 2)})
    r.handle(MetadataResolved(NAMES))
    return r.last(ApplyAssignment), r.last(FetchCommittedOffsets)


def fetched(r: MemberRig, offsets: dict[TopicPartition, int | None]) -> ApplyAssignment:
    """Join with foo 0-2 and answer the round's OffsetFetch with ``offsets``."""
    apply, fetch = assigned(r)
    r.handle(CommittedOffsetsFetched(fetch.request_id, offsets))
    return apply


def test_the_fetch_goes_out_with_the_assignment_which_names_every_added_partition_waiting() -> None:
    r = MemberRig()
    apply, fetch = assigned(r)
    assert fetch.partitions == (FOO_0, FOO_1, FOO_2)
    assert apply.awaiting_start == (FOO_0, FOO_1, FOO_2)
    assert apply.start_request_id is not None
    assert r.last(InvokeOnAssign).partitions == (FOO_0, FOO_1, FOO_2)
    assert r.member.assignment.round is not None
    assert r.member.assignment.round.phase is RoundPhase.ASSIGNING
    assert not r.all(StartFetching)  # nothing starts before the committed offsets are known


def test_the_ack_does_not_wait_for_the_committed_offsets() -> None:
    r = MemberRig()
    apply, fetch = assigned(r)
    r.handle(AssignmentApplied(apply.request_id))
    r.handle(CallbackCompleted(r.last(InvokeOnAssign).request_id))
    assert r.member.state is MemberState.ACK_ASSIGNMENT  # no CommittedOffsetsFetched yet
    assert r.member.assignment.round is None
    ack = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert ack.request.topic_partitions is not None
    assert ack.request.topic_partitions[0].partitions == (0, 1, 2)
    assert r.member.state is MemberState.STABLE
    # The answer after the ack still starts the partitions.
    r.handle(CommittedOffsetsFetched(fetch.request_id, {FOO_0: 5, FOO_1: 6, FOO_2: 7}))
    assert r.last(StartFetching) == StartFetching(
        apply.start_request_id, {FOO_0: 5, FOO_1: 6, FOO_2: 7}
    )
    assert not r.all(ListStartOffsets)


def test_nothing_committed_is_listed_as_the_follow_up_of_the_start() -> None:
    r = MemberRig(auto_offset_reset="earliest", isolation_level="read_uncommitted")
    apply = fetched(r, {FOO_0: 40, FOO_1: None, FOO_2: None})
    listing = r.last(ListStartOffsets)
    assert listing.partitions == (FOO_1, FOO_2)
    assert (listing.policy, listing.read_committed) == (ResetPolicy.EARLIEST, False)
    started = r.last(StartFetching)
    assert started == StartFetching(
        apply.start_request_id, {FOO_0: 40}, then_request_id=listing.request_id
    )
    assert r.commands.index(started) < r.commands.index(listing)  # the wait is known first


def test_the_listed_answer_becomes_start_fetching_with_absolute_offsets_only() -> None:
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
    committed_apply = fetched(committed, {FOO_0: 1, FOO_1: 2, FOO_2: 3})
    error_policy = MemberRig(auto_offset_reset="error")
    error_apply = fetched(error_policy, {})
    assert not committed.all(ListStartOffsets)
    assert not error_policy.all(ListStartOffsets)
    assert committed.last(StartFetching) == StartFetching(
        committed_apply.start_request_id, {FOO_0: 1, FOO_1: 2, FOO_2: 3}
    )
    # No follow-up: the application thread starts them at the policy's logical offset.
    assert error_policy.last(StartFetching) == StartFetching(error_apply.start_request_id, {})


def fence_and_rejoin(r: MemberRig) -> SendHeartbeat:
    """Fence the member (its partitions are lost) and return its rejoin heartbeat."""
    r.advance(5_000)
    heartbeat = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatFailed(heartbeat.request_id, 110))  # FENCED_MEMBER_EPOCH
    for lost in r.all(InvokeOnLost):  # the partitions were handed out: on_lost, then rejoin
        r.handle(CallbackCompleted(lost.request_id))
    r.poll()
    rejoin = r.last(SendHeartbeat)
    assert rejoin.request.member_epoch == 0
    return rejoin


def test_a_fetch_answer_after_a_fence_starts_nothing() -> None:
    r = MemberRig(auto_offset_reset="latest")
    _, stale_fetch = assigned(r)
    rejoin = fence_and_rejoin(r)
    r.handle(CommittedOffsetsFetched(stale_fetch.request_id, {FOO_0: 4}))
    assert not r.all(StartFetching), "the fenced membership's fetch was dropped with it"
    assert not r.all(ListStartOffsets)
    r.respond(rejoin, 3, {FOO: (0, 1, 2)})
    r.handle(MetadataResolved(NAMES))
    apply, fetch = r.last(ApplyAssignment), r.last(FetchCommittedOffsets)
    assert fetch is not stale_fetch
    r.handle(CommittedOffsetsFetched(fetch.request_id, {FOO_0: 4, FOO_1: 5, FOO_2: 6}))
    assert r.last(StartFetching) == StartFetching(
        apply.start_request_id, {FOO_0: 4, FOO_1: 5, FOO_2: 6}
    )


def test_a_late_listing_after_a_fence_is_forwarded_with_its_own_request_id() -> None:
    """The member is fenced before the reset policy's lookup answers and rejoins; the next
    round asks again under new ids. The first answer is still forwarded, under its own id,
    which the application thread no longer waits for
    (``tests/unit/client/test_assignment_start_offsets``)."""
    r = MemberRig(auto_offset_reset="latest")
    fetched(r, {})
    stale = r.last(ListStartOffsets)
    rejoin = fence_and_rejoin(r)
    r.respond(rejoin, 3, {FOO: (0, 1, 2)})
    r.handle(MetadataResolved(NAMES))
    r.handle(CommittedOffsetsFetched(r.last(FetchCommittedOffsets).request_id, {}))
    fresh = r.last(ListStartOffsets)
    assert fresh.request_id != stale.request_id
    assert r.last(StartFetching).then_request_id == fresh.request_id
    r.handle(StartOffsetsListed(stale.request_id, {FOO_0: 999}))
    assert r.last(StartFetching) == StartFetching(stale.request_id, {FOO_0: 999})
