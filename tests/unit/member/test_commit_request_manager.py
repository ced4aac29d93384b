"""Commits: auto-commit, stale epochs, user commits, committed-offset fetches, close and STALE."""

from __future__ import annotations

from member_rig import FOO, MemberRig

from consumer.member import (
    AppPolled,
    CallbackCompleted,
    CloseOption,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    CommitReason,
    CommitRequested,
    CommittedOffsetsFetched,
    ConsumedOffsetsReported,
    FetchCommittedOffsets,
    HeartbeatSucceeded,
    InvokeOnLost,
    InvokeOnRevoke,
    MemberState,
    PollIntervalExpired,
    ReportCommitResult,
    ReportError,
    RevocationCompleted,
    SendHeartbeat,
    ShutDown,
    Subscribed,
    TopicPartition,
)

S = MemberState
FOO_0 = TopicPartition("foo", 0)
FOO_1 = TopicPartition("foo", 1)


def test_auto_commit_on_its_interval_commits_only_reported_offsets() -> None:
    r = MemberRig(auto_commit_interval_ms=1_000)
    r.stable({FOO: (0, 1)})
    r.handle(ConsumedOffsetsReported({FOO_0: 10}))
    r.advance(999)
    r.poll()
    assert not r.all(CommitOffsets)
    r.advance(1)
    r.poll()
    commit = r.last(CommitOffsets)
    assert commit.reason is CommitReason.AUTO
    assert dict(commit.offsets) == {FOO_0: 10}
    assert (commit.member_id, commit.member_epoch) == (r.member.member_id, 1)
    r.handle(CommitCompleted(commit.request_id, {FOO_0: 0}))
    r.advance(1_000)
    r.poll()
    assert len(r.all(CommitOffsets)) == 1  # nothing new consumed: nothing to commit


def test_stale_epoch_on_pre_revoke_commit_is_retried_after_the_epoch_refreshes() -> None:
    r = MemberRig()
    r.stable({FOO: (0, 1)})
    r.handle(AppPolled({FOO_0: 5}))
    r.advance(5_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.respond(hb, 2, {FOO: (1,)})
    assert not r.all(CommitOffsets)[1:], "nothing is committed before fetching stopped"
    r.stop_done()
    first = r.last(CommitOffsets)
    r.handle(CommitCompleted(first.request_id, {FOO_0: 113}))
    assert r.last(CommitOffsets) is first  # waits for a fresh epoch
    assert not r.all(InvokeOnRevoke)
    expedited = [c for c in r.poll() if isinstance(c, SendHeartbeat)]
    assert expedited, "a stale epoch expedites a heartbeat"
    r.handle(HeartbeatSucceeded(expedited[0].request_id, 3, 5_000))
    retry = r.last(CommitOffsets)
    assert retry is not first
    assert retry.member_epoch == 3
    r.handle(CommitCompleted(retry.request_id, {FOO_0: 0}))
    assert r.last(InvokeOnRevoke).partitions == (FOO_0,)


def test_pre_revoke_commit_gives_up_at_the_rebalance_deadline_and_revokes() -> None:
    r = MemberRig(rebalance_timeout_ms=10_000)
    r.stable({FOO: (0, 1)})
    r.handle(AppPolled({FOO_0: 5}))
    r.advance(5_000)
    r.respond([c for c in r.poll() if isinstance(c, SendHeartbeat)][0], 2, {FOO: (1,)})
    r.stop_done()
    commit = r.last(CommitOffsets)
    r.handle(CommitCompleted(commit.request_id, {FOO_0: 16}))  # retriable: backoff
    r.advance(2_000)
    r.handle(AppPolled())
    r.poll()
    retry = r.last(CommitOffsets)
    assert retry is not commit
    r.advance(10_000)
    r.handle(CommitCompleted(retry.request_id, {FOO_0: 16}))
    assert r.last(ReportError).error_name == "NOT_COORDINATOR"
    assert r.last(InvokeOnRevoke).partitions == (FOO_0,)


def test_user_commit_surfaces_stale_epoch_and_retries_coordinator_errors() -> None:
    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(CommitRequested(token=7, offsets={FOO_0: 3}))
    first = r.last(CommitOffsets)
    assert first.reason is CommitReason.USER
    r.handle(CommitCompleted(first.request_id, error_code=15))
    r.advance(2_000)
    r.handle(AppPolled())
    r.poll()
    second = r.last(CommitOffsets)
    assert second is not first
    r.handle(CommitCompleted(second.request_id, {FOO_0: 113}))
    assert r.last(ReportCommitResult) == ReportCommitResult(7, {FOO_0: 113})
    r.handle(CommitRequested(token=8))  # nothing consumed: completes at once
    assert r.last(ReportCommitResult) == ReportCommitResult(8, {})
    r.handle(CommitRequested(token=9, offsets={FOO_0: 4}))
    r.handle(CommitCompleted(r.last(CommitOffsets).request_id, {FOO_0: 0}))
    assert r.last(ReportCommitResult) == ReportCommitResult(9, {})


def test_auto_commit_non_retriable_error_is_reported() -> None:
    r = MemberRig(auto_commit_interval_ms=1_000)
    r.stable({FOO: (0,)})
    r.handle(AppPolled({FOO_0: 3}))
    r.advance(1_000)
    r.poll()
    r.handle(CommitCompleted(r.last(CommitOffsets).request_id, {FOO_0: 29}))
    report = r.last(ReportError)
    assert (report.error_code, report.fatal) == (29, False)


def test_fetch_stale_epoch_is_retried_and_never_read_as_no_offset() -> None:
    r = MemberRig()
    join = r.join()
    r.respond(join, 1, {FOO: (0,)})
    r.answer_everything_fetch = None  # type: ignore[attr-defined]
    from consumer.member import MetadataResolved

    r.handle(MetadataResolved({FOO: "foo"}))
    fetch = r.last(FetchCommittedOffsets)
    assert (fetch.member_id, fetch.member_epoch) == (r.member.member_id, 1)
    r.handle(CommittedOffsetsFetched(fetch.request_id, {}, error_code=113))
    assert r.last(FetchCommittedOffsets) is fetch
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatSucceeded(hb.request_id, 2, 5_000))
    retry = r.last(FetchCommittedOffsets)
    assert retry is not fetch
    assert retry.member_epoch == 2
    r.handle(CommittedOffsetsFetched(retry.request_id, {}, partition_errors={FOO_0: 15}))
    r.advance(1_000)
    r.poll()
    third = r.last(FetchCommittedOffsets)
    assert third is not retry
    r.handle(CommittedOffsetsFetched(third.request_id, {FOO_0: 41}))
    from consumer.member import ApplyAssignment, StartFetching

    job = r.last(ApplyAssignment).start_request_id
    assert r.last(StartFetching) == StartFetching(job, {FOO_0: 41})


def test_a_stale_fetch_answer_after_the_epoch_moved_is_sent_again_at_once() -> None:
    """Regression (a 25-member cold join hung in RECONCILE_ASSIGNMENT, 3 of 30 runs): the
    OffsetFetch left with epoch 1, a heartbeat answer moved the epoch to 2 while it was in flight,
    then the fetch came back STALE_MEMBER_EPOCH. It waited for the *next* epoch change, which no
    heartbeat brings once the group is balanced, so the round never ended."""
    r = MemberRig()
    r.respond(r.join(), 1, {FOO: (0,)})
    from consumer.member import MetadataResolved

    r.handle(MetadataResolved({FOO: "foo"}))
    fetch = r.last(FetchCommittedOffsets)
    assert fetch.member_epoch == 1
    r.advance(5_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatSucceeded(hb.request_id, 2, 5_000))  # the same target, a new epoch
    r.handle(CommittedOffsetsFetched(fetch.request_id, {}, error_code=113))
    retry = r.last(FetchCommittedOffsets)
    assert retry is not fetch, "sent again with the epoch it already has"
    assert retry.member_epoch == 2
    r.handle(CommittedOffsetsFetched(retry.request_id, {FOO_0: 7}))
    from consumer.member import ApplyAssignment, StartFetching

    job = r.last(ApplyAssignment).start_request_id
    assert r.last(StartFetching) == StartFetching(job, {FOO_0: 7})


def test_a_stale_commit_answer_after_the_epoch_moved_is_sent_again_at_once() -> None:
    r = MemberRig()
    r.stable({FOO: (0, 1)})
    r.handle(AppPolled({FOO_0: 5}))
    r.advance(5_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.respond(hb, 2, {FOO: (1,)})
    r.stop_done()
    first = r.last(CommitOffsets)
    assert first.member_epoch == 2
    r.advance(5_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatSucceeded(hb.request_id, 3, 5_000))  # epoch moved while in flight
    r.handle(CommitCompleted(first.request_id, {FOO_0: 113}))
    retry = r.last(CommitOffsets)
    assert retry is not first
    assert retry.member_epoch == 3


def test_fetch_non_retriable_error_is_reported_and_the_reset_policy_applies() -> None:
    r = MemberRig()
    r.respond(r.join(), 1, {FOO: (0,)})
    from consumer.member import (
        ApplyAssignment,
        ListStartOffsets,
        MetadataResolved,
        StartFetching,
        StartOffsetsListed,
    )

    r.handle(MetadataResolved({FOO: "foo"}))
    apply = r.last(ApplyAssignment)
    assert apply.awaiting_start == (FOO_0,)
    r.handle(CommittedOffsetsFetched(r.last(FetchCommittedOffsets).request_id, error_code=30))
    assert r.last(ReportError).error_code == 30
    listing = r.last(ListStartOffsets)
    assert listing.partitions == (FOO_0,)
    started = r.last(StartFetching)
    assert started == StartFetching(apply.start_request_id, {}, then_request_id=listing.request_id)
    r.handle(StartOffsetsListed(listing.request_id, {FOO_0: 12}))
    assert r.last(StartFetching) == StartFetching(listing.request_id, {FOO_0: 12})


def test_close_commits_revokes_leaves_and_shuts_down() -> None:
    r = MemberRig()
    r.stable({FOO: (0, 1)})
    r.handle(AppPolled({FOO_0: 8, FOO_1: 7}))
    r.handle(CloseRequested())
    # The offsets reported when fetching stopped win over the older AppPolled ones.
    r.stop_done({FOO_1: 9})
    commit = r.last(CommitOffsets)
    assert commit.reason is CommitReason.CLOSE
    assert dict(commit.offsets) == {FOO_0: 8, FOO_1: 9}
    r.handle(CommitCompleted(commit.request_id, {FOO_0: 0, FOO_1: 0}))
    revoke = r.last(InvokeOnRevoke)
    r.handle(RevocationCompleted(revoke.request_id))
    leave = r.last(SendHeartbeat)
    assert leave.request.member_epoch == -1
    assert isinstance(r.commands[-1], ShutDown)
    assert r.member.is_shut_down
    assert r.member.state is S.UNSUBSCRIBED
    assert r.member.poll(r.now) == ([], None)
    assert r.handle(AppPolled()) == []
    import pytest

    from consumer.member import MemberStateError

    with pytest.raises(MemberStateError):
        r.handle(Subscribed(topic_names=("foo",)))


def test_close_remaining_in_group_sends_no_leave_for_a_dynamic_member() -> None:
    r = MemberRig(auto_commit=False)
    r.stable({FOO: (0,)})
    sent = len(r.all(SendHeartbeat))
    r.handle(CloseRequested(CloseOption.REMAIN_IN_GROUP))
    r.stop_done()
    r.handle(RevocationCompleted(r.last(InvokeOnRevoke).request_id))
    assert len(r.all(SendHeartbeat)) == sent
    assert r.member.is_shut_down


def test_poll_interval_expiry_leaves_loses_and_rejoins_on_the_next_poll() -> None:
    r = MemberRig(max_poll_interval_ms=60_000)
    r.stable({FOO: (0,)})
    r.advance(59_999)
    r.poll()
    assert r.member.state is S.STABLE
    r.advance(1)
    r.poll()
    assert r.member.state is S.STALE
    leave = r.last(SendHeartbeat)
    assert leave.request.member_epoch == -1
    assert r.last(ReportError).error_name == "MAX_POLL_INTERVAL_EXCEEDED"
    lost = r.last(InvokeOnLost)
    r.handle(CallbackCompleted(lost.request_id))
    r.advance(30_000)
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]  # no heartbeats while STALE
    r.handle(AppPolled())
    assert r.member.state is S.JOINING
    rejoin = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert rejoin.request.member_epoch == 0


def test_poll_interval_counts_from_the_applications_poll_call_not_from_the_report() -> None:
    r = MemberRig(max_poll_interval_ms=10_000)
    r.stable({FOO: (0,)})
    r.advance(4_000)
    polled_at = r.now
    r.advance(3_000)
    r.handle(AppPolled(polled_at_ms=polled_at))  # a report that arrived 3 s after the call
    r.handle(AppPolled(polled_at_ms=polled_at - 1_000))  # an older call never winds it back
    r.advance(polled_at + 9_999 - r.now)
    r.poll()
    assert r.member.state is S.STABLE
    r.advance(1)
    r.poll()
    assert r.member.state is S.STALE


def test_a_poll_time_ahead_of_the_members_clock_counts_as_now() -> None:
    r = MemberRig(max_poll_interval_ms=10_000)
    r.stable({FOO: (0,)})
    reported_at = r.now
    r.handle(AppPolled(polled_at_ms=reported_at + 60_000))
    r.advance(10_000)
    r.poll()
    assert r.member.state is S.STALE


def test_poll_interval_expired_input_and_poll_before_lost_completes() -> None:
    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(PollIntervalExpired())
    assert r.member.state is S.STALE
    r.handle(AppPolled())  # polled, but on_lost still running: stay STALE
    assert r.member.state is S.STALE
    r.handle(CallbackCompleted(r.last(InvokeOnLost).request_id))
    assert r.member.state is S.JOINING


def test_unsubscribe_while_stale_or_fenced_drops_out_without_leaving() -> None:
    from consumer.member import Unsubscribed

    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(PollIntervalExpired())
    sent = len(r.all(SendHeartbeat))
    r.handle(Unsubscribed())
    assert r.member.state is S.UNSUBSCRIBED
    assert len(r.all(SendHeartbeat)) == sent
    r.handle(CloseRequested())
    assert r.member.is_shut_down


def test_resubscribing_while_leaving_rejoins_after_the_leave() -> None:
    from consumer.member import Unsubscribed

    r = MemberRig(auto_commit=False)
    r.stable({FOO: (0,)})
    r.handle(Unsubscribed())
    r.stop_done()
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(RevocationCompleted(r.last(InvokeOnRevoke).request_id))
    assert r.member.state is S.UNSUBSCRIBED
    r.handle(AppPolled())
    assert r.member.state is S.JOINING
    r.handle(Subscribed(topic_names=()))  # empty names = unsubscribe; nothing owned: leave at once
    assert r.member.state is S.UNSUBSCRIBED
    assert r.last(SendHeartbeat).is_leave


def test_user_commit_is_not_retried_past_the_callers_timeout() -> None:
    """A synchronous caller gave up at its timeout: no retry may land after that."""
    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(CommitRequested(token=3, offsets={FOO_0: 5}, timeout_ms=4_000))
    first = r.last(CommitOffsets)
    r.handle(CommitCompleted(first.request_id, error_code=15))  # retriable: backoff
    r.advance(4_000)
    r.handle(AppPolled())
    r.poll()
    assert r.last(CommitOffsets) is first, "nothing is re-sent once the caller's deadline passed"
    assert r.last(ReportCommitResult) == ReportCommitResult(3, {FOO_0: 15})


def test_waiting_user_commit_fails_when_the_membership_ends_and_is_never_resent() -> None:
    """Offsets consumed under one membership never overwrite commits made after a rejoin."""
    r = MemberRig(max_poll_interval_ms=60_000)
    r.stable({FOO: (0,)})
    r.handle(CommitRequested(token=4, offsets={FOO_0: 5}))
    r.handle(CommitCompleted(r.last(CommitOffsets).request_id, error_code=13))  # backoff
    sent = len(r.all(CommitOffsets))
    r.handle(PollIntervalExpired())
    assert r.member.state is S.STALE
    assert r.last(ReportCommitResult) == ReportCommitResult(4, {FOO_0: 25})
    r.handle(CallbackCompleted(r.last(InvokeOnLost).request_id))
    r.handle(AppPolled())
    assert r.member.state is S.JOINING
    rejoin = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.respond(rejoin, 3, {FOO: (0,)})
    r.answer_everything()
    for _ in range(12):
        r.advance(10_000)
        r.handle(AppPolled())
        r.poll()
    user = [c for c in r.all(CommitOffsets) if c.reason is CommitReason.USER]
    assert len(user) == sent


def test_in_flight_user_commit_counts_when_the_membership_ends_but_is_not_retried() -> None:
    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(CommitRequested(token=5, offsets={FOO_0: 5}))
    in_flight = r.last(CommitOffsets)
    r.handle(PollIntervalExpired())
    r.handle(CommitCompleted(in_flight.request_id, error_code=13))  # retriable, but too late
    assert r.last(ReportCommitResult) == ReportCommitResult(5, {FOO_0: 13})
    r.advance(10_000)
    r.poll()
    assert r.last(CommitOffsets) is in_flight


def test_user_commit_of_a_revoked_partition_is_not_retried_after_the_revocation() -> None:
    r = MemberRig(auto_commit=False, retry_backoff_ms=10_000, retry_backoff_max_ms=10_000)
    r.stable({FOO: (0, 1)})
    r.handle(CommitRequested(token=6, offsets={FOO_0: 5, FOO_1: 7}))
    r.handle(CommitCompleted(r.last(CommitOffsets).request_id, error_code=14))  # backoff
    sent = len(r.all(CommitOffsets))
    r.advance(5_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.respond(hb, 2, {FOO: (1,)})  # FOO_0 is revoked
    r.stop_done()
    r.handle(RevocationCompleted(r.last(InvokeOnRevoke).request_id))
    retry = r.all(CommitOffsets)[sent:]
    assert all(FOO_0 not in c.offsets for c in retry), retry
    r.advance(10_000)
    r.handle(AppPolled())
    r.poll()
    later = r.all(CommitOffsets)[sent:]
    assert later, "the partition still owned is retried"
    assert all(dict(c.offsets) == {FOO_1: 7} for c in later), later
    r.handle(CommitCompleted(later[-1].request_id, {FOO_1: 0}))
    assert r.last(ReportCommitResult) == ReportCommitResult(6, {FOO_0: 27})


def test_in_flight_user_commit_of_a_revoked_partition_counts_but_is_not_retried() -> None:
    r = MemberRig(auto_commit=False)
    r.stable({FOO: (0, 1)})
    r.handle(CommitRequested(token=7, offsets={FOO_0: 5}))
    in_flight = r.last(CommitOffsets)
    r.advance(5_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.respond(hb, 2, {FOO: (1,)})
    r.stop_done()
    r.handle(RevocationCompleted(r.last(InvokeOnRevoke).request_id))
    r.handle(CommitCompleted(in_flight.request_id, error_code=14))  # retriable, but revoked
    assert r.last(ReportCommitResult) == ReportCommitResult(7, {FOO_0: 14})
    r.advance(10_000)
    r.handle(AppPolled())
    r.poll()
    assert r.last(CommitOffsets) is in_flight


def test_waiting_auto_commit_of_a_revoked_partition_is_dropped_quietly() -> None:
    r = MemberRig(
        auto_commit_interval_ms=1_000, retry_backoff_ms=10_000, retry_backoff_max_ms=10_000
    )
    r.stable({FOO: (0, 1)})
    r.handle(ConsumedOffsetsReported({FOO_0: 10}))
    r.advance(1_000)
    r.poll()
    auto = r.last(CommitOffsets)
    assert auto.reason is CommitReason.AUTO
    r.handle(CommitCompleted(auto.request_id, {FOO_0: 14}))  # backoff: waits to be re-sent
    errors = len(r.all(ReportError))
    r.advance(4_000)
    hb = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.respond(hb, 2, {FOO: (1,)})
    r.stop_done()
    pre_revoke = r.last(CommitOffsets)
    assert pre_revoke.reason is CommitReason.PRE_REVOKE
    r.handle(CommitCompleted(pre_revoke.request_id, {FOO_0: 0}))
    r.handle(RevocationCompleted(r.last(InvokeOnRevoke).request_id))
    r.advance(20_000)
    r.handle(AppPolled())
    r.poll()
    assert all(
        FOO_0 not in c.offsets for c in r.all(CommitOffsets)[1:] if c.reason is CommitReason.AUTO
    )
    assert len(r.all(ReportError)) == errors, "a dropped auto-commit is not an error to report"
