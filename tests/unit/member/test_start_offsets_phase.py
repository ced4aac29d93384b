"""The LISTING_OFFSETS phase: the round looks up where the reset policy starts new partitions
with nothing committed, and hands the absolute offsets to the data plane in ApplyAssignment."""

from __future__ import annotations

from member_rig import FOO, NAMES, MemberRig

from consumer.member import (
    ApplyAssignment,
    CommittedOffsetsFetched,
    FetchCommittedOffsets,
    HeartbeatFailed,
    ListStartOffsets,
    MemberState,
    MetadataResolved,
    ResetPolicy,
    SendHeartbeat,
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


def test_only_partitions_without_a_committed_offset_are_listed_then_applied() -> None:
    r = MemberRig(auto_offset_reset="earliest", isolation_level="read_uncommitted")
    fetched(r, {FOO_0: 40, FOO_1: None, FOO_2: None})
    listing = r.last(ListStartOffsets)
    assert listing.partitions == (FOO_1, FOO_2)
    assert (listing.policy, listing.read_committed) == (ResetPolicy.EARLIEST, False)
    assert r.member.assignment.round is not None
    assert r.member.assignment.round.phase is RoundPhase.LISTING_OFFSETS
    assert not r.all(ApplyAssignment)  # the data plane waits for the offsets
    r.handle(StartOffsetsListed(listing.request_id, {FOO_1: 7, FOO_2: 0}))
    apply = r.last(ApplyAssignment)
    assert apply.committed_offsets == {FOO_0: 40, FOO_1: None, FOO_2: None}
    assert apply.start_offsets == {FOO_1: 7, FOO_2: 0}


def test_latest_with_read_committed_asks_for_the_last_stable_offset() -> None:
    r = MemberRig(auto_offset_reset="latest", isolation_level="read_committed")
    fetched(r, {})
    listing = r.last(ListStartOffsets)
    assert (listing.policy, listing.read_committed) == (ResetPolicy.LATEST, True)
    assert listing.partitions == (FOO_0, FOO_1, FOO_2)


def test_a_failed_lookup_leaves_the_partition_to_the_logical_offset() -> None:
    r = MemberRig(auto_offset_reset="earliest")
    fetched(r, {})
    listing = r.last(ListStartOffsets)
    # FOO_1's leader never answered; a negative offset is not an absolute one; FOO_9 was not
    # asked for. Only FOO_0 gets an absolute start, the others the reset policy's logical one.
    r.handle(
        StartOffsetsListed(listing.request_id, {FOO_0: 3, FOO_2: -1, TopicPartition("foo", 9): 5})
    )
    assert r.last(ApplyAssignment).start_offsets == {FOO_0: 3}


def test_everything_committed_or_policy_error_skips_the_phase() -> None:
    committed = MemberRig(auto_offset_reset="earliest")
    fetched(committed, {FOO_0: 1, FOO_1: 2, FOO_2: 3})
    error_policy = MemberRig(auto_offset_reset="error")
    fetched(error_policy, {})
    for r in (committed, error_policy):
        assert not r.all(ListStartOffsets)
        assert r.last(ApplyAssignment).start_offsets == {}


def test_a_stale_answer_of_a_superseded_round_is_ignored() -> None:
    """The round waiting for its start offsets is fenced (aborted); the member rejoins and its
    next round asks again. The first round's late answer must not start the new round's
    partitions: only the answer with the new request id counts."""
    r = MemberRig(auto_offset_reset="latest")
    fetched(r, {})
    stale = r.last(ListStartOffsets)
    r.advance(5_000)
    heartbeat = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatFailed(heartbeat.request_id, 110))  # FENCED_MEMBER_EPOCH: round aborted
    # Nothing was handed out yet, so nothing is lost: the member rejoins at once.
    assert r.member.state is MemberState.JOINING
    r.poll()
    rejoin = r.last(SendHeartbeat)
    assert rejoin.request.member_epoch == 0
    r.respond(rejoin, 3, {FOO: (0, 1, 2)})
    r.handle(MetadataResolved(NAMES))  # the fenced member forgot its topic names
    r.handle(CommittedOffsetsFetched(r.last(FetchCommittedOffsets).request_id, {}))
    fresh = r.last(ListStartOffsets)
    assert fresh.request_id != stale.request_id
    applies_before = len(r.all(ApplyAssignment))
    r.handle(StartOffsetsListed(stale.request_id, {FOO_0: 999}))
    assert len(r.all(ApplyAssignment)) == applies_before  # ignored: still waiting
    r.handle(StartOffsetsListed(fresh.request_id, {FOO_0: 11}))
    assert r.last(ApplyAssignment).start_offsets == {FOO_0: 11}
    assert r.last(ApplyAssignment).assigned == (FOO_0, FOO_1, FOO_2)
