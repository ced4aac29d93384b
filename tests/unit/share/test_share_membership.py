"""Join, heartbeats, subscription changes, leave, close and staleness of the share member."""

from __future__ import annotations

import pytest
from share_rig import BAR, FOO, ShareRig, parts

from consumer.member.commands import FindCoordinator, ReportError, ShutDown
from consumer.member.errors import MemberConfigError, MemberStateError
from consumer.member.inputs import CoordinatorChanged, PollIntervalExpired, Unsubscribed
from consumer.share import (
    ApplyShareAssignment,
    AppPolled,
    CloseRequested,
    SendShareHeartbeat,
    ShareMemberConfig,
    ShareState,
    StopAndFlush,
    Subscribed,
)

S = ShareState


def test_subscribing_joins_at_once_with_epoch_zero_names_and_rack() -> None:
    rig = ShareRig(rack_id="rack-a")
    rig.handle(Subscribed(("foo", "bar", "foo")))
    assert rig.state is S.JOINING
    assert rig.of(SendShareHeartbeat, rig.poll()) == [], "no heartbeat before the coordinator"
    assert rig.of(FindCoordinator) == [FindCoordinator("sg")]
    rig.handle(CoordinatorChanged(1))
    join = rig.heartbeat().request
    assert (join.group_id, join.member_id, join.member_epoch) == ("sg", rig.member.member_id, 0)
    assert join.subscribed_topic_names == ("bar", "foo")
    assert join.rack_id == "rack-a"
    assert rig.of(SendShareHeartbeat, rig.poll()) == [], "one heartbeat in flight at a time"


def test_joining_with_nothing_assigned_goes_stable_through_reconciling() -> None:
    rig = ShareRig()
    rig.handle(Subscribed(("foo",)))
    rig.handle(CoordinatorChanged(1))
    out = rig.answer(rig.heartbeat(), 3, frozenset())
    assert rig.state is S.STABLE
    assert out == [], "nothing to stop or apply"
    assert rig.member.member_epoch == 3


def test_heartbeats_are_deltas_then_full_after_an_error() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    assert rig.of(SendShareHeartbeat)[-1].request.subscribed_topic_names is None
    rig.advance(999)
    assert rig.of(SendShareHeartbeat, rig.poll()) == [], "waits for the 1 s interval"
    rig.advance(1)
    delta = rig.heartbeat()
    assert delta.request.member_epoch == 1
    assert delta.request.subscribed_topic_names is None, "names unchanged: null"
    assert delta.request.rack_id is None
    rig.fail(delta, 14)  # COORDINATOR_LOAD_IN_PROGRESS: retry after the backoff
    assert rig.state is S.STABLE
    assert rig.of(SendShareHeartbeat, rig.poll()) == [], "backoff first"
    rig.advance(100)
    retry = rig.heartbeat()
    assert retry.request.subscribed_topic_names == ("foo",), "full request after an error"


def test_changing_the_topic_names_heartbeats_at_once_with_the_new_names() -> None:
    rig = ShareRig()
    rig.join()
    assert rig.handle(Subscribed(("foo",))) == [], "same names: nothing happens"
    rig.handle(Subscribed(("bar", "foo")))
    assert rig.state is S.STABLE
    sent = rig.heartbeat()
    assert sent.request.subscribed_topic_names == ("bar", "foo")
    assert sent.request.member_epoch == 1


def test_unsubscribing_stops_and_flushes_then_leaves_with_epoch_minus_one() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0, 1))
    out = rig.handle(Unsubscribed())
    assert rig.state is S.PREPARE_LEAVING
    assert rig.of(StopAndFlush, out)[0].partitions == tuple(sorted(parts(FOO, 0, 1), key=str))
    assert rig.of(SendShareHeartbeat, rig.poll()) == [], "no leave before the flush"
    rig.flushed()
    assert rig.state is S.LEAVING
    leave = rig.of(SendShareHeartbeat, rig.poll())
    assert [h.request.member_epoch for h in leave] == [-1]
    assert leave[0].is_leave
    assert leave[0].request.member_id == rig.member.member_id
    assert rig.state is S.UNSUBSCRIBED
    assert rig.member.owned == frozenset()
    assert rig.of(ShutDown) == []


def test_leaving_waits_for_the_coordinator_then_sends_the_leave() -> None:
    rig = ShareRig()
    rig.join()
    rig.advance(1_000)
    out = rig.fail(rig.heartbeat(), 16)  # NOT_COORDINATOR: look the coordinator up again
    assert rig.of(FindCoordinator, out) == [FindCoordinator("sg")]
    rig.handle(CloseRequested())
    assert rig.state is S.LEAVING, "nothing to flush"
    out = rig.poll()
    assert rig.of(SendShareHeartbeat, out) == []
    rig.handle(CoordinatorChanged(2))
    out = rig.poll()
    assert [h.request.member_epoch for h in rig.of(SendShareHeartbeat, out)] == [-1]
    assert rig.of(ShutDown, out) == [ShutDown()]
    assert rig.member.is_shut_down
    with pytest.raises(MemberStateError):
        rig.handle(Subscribed(("foo",)))
    assert rig.member.poll(rig.now) == ([], None)


def test_subscribing_again_while_leaving_rejoins_after_the_leave() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.handle(Unsubscribed())
    rig.handle(Subscribed(("bar",)))
    assert rig.state is S.PREPARE_LEAVING
    rig.flushed()
    out = rig.poll()
    assert [h.request.member_epoch for h in rig.of(SendShareHeartbeat, out)] == [-1]
    assert rig.state is S.JOINING
    join = rig.heartbeat().request
    assert (join.member_epoch, join.subscribed_topic_names) == (0, ("bar",))


def test_closing_while_out_of_the_group_or_unsubscribed_shuts_down_at_once() -> None:
    fresh = ShareRig()
    assert fresh.handle(CloseRequested()) == [ShutDown()]
    stale = ShareRig(max_poll_interval_ms=5_000)
    stale.join(parts(FOO, 0))
    stale.advance(5_000)
    stale.poll()
    assert stale.state is S.STALE
    assert ShutDown() in stale.handle(CloseRequested())
    assert stale.state is S.UNSUBSCRIBED


def test_no_poll_within_the_interval_leaves_stops_and_rejoins_on_the_next_poll() -> None:
    rig = ShareRig(max_poll_interval_ms=5_000)
    rig.join(parts(FOO, 0))
    rig.advance(4_000)
    rig.handle(AppPolled())
    rig.advance(4_999)
    rig.poll()
    assert rig.state is S.STABLE, "the poll restarted the timer"
    rig.advance(1)
    out = rig.poll()
    assert rig.state is S.STALE
    assert [r.error_name for r in rig.of(ReportError, out)] == ["MAX_POLL_INTERVAL_EXCEEDED"]
    assert [h.request.member_epoch for h in rig.of(SendShareHeartbeat, out)] == [-1]
    assert rig.of(StopAndFlush, out)[0].partitions == tuple(parts(FOO, 0))
    rig.handle(AppPolled())
    assert rig.state is S.STALE, "the flush is still pending"
    rig.flushed()
    assert rig.state is S.JOINING
    assert rig.heartbeat().request.member_epoch == 0


def test_a_stale_member_with_nothing_to_flush_rejoins_when_polled() -> None:
    rig = ShareRig(max_poll_interval_ms=5_000)
    rig.join()
    rig.handle(PollIntervalExpired())
    assert rig.state is S.STALE
    assert rig.of(StopAndFlush) == [], "nothing was fetched: released at once"
    rig.advance(10)
    rig.handle(AppPolled())
    assert rig.state is S.JOINING


def test_unsubscribing_while_fenced_forgets_the_group() -> None:
    rig = ShareRig()
    rig.join(parts(BAR, 2))
    rig.advance(1_000)
    rig.fail(rig.heartbeat(), 25)
    assert rig.state is S.FENCED
    rig.handle(Unsubscribed())
    assert rig.state is S.UNSUBSCRIBED
    assert rig.last(StopAndFlush).partitions == tuple(parts(BAR, 2))
    assert rig.flushed() == [], "the late answer changes nothing"
    assert rig.state is S.UNSUBSCRIBED
    assert rig.last(ApplyShareAssignment).assigned == tuple(parts(BAR, 2))


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"group_id": ""}, "group_id"),
        ({"group_id": "g", "rack_id": ""}, "rack_id"),
        ({"group_id": "g", "max_poll_interval_ms": 0}, "max_poll_interval_ms"),
        ({"group_id": "g", "retry_backoff_ms": 200, "retry_backoff_max_ms": 100}, "backoff"),
        ({"group_id": "g", "retry_backoff_jitter": 1.0}, "retry_backoff_jitter"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(settings: dict[str, object], field: str) -> None:
    with pytest.raises(MemberConfigError, match=field):
        ShareMemberConfig(**settings)  # type: ignore[arg-type]


def test_bad_topic_names_are_refused() -> None:
    with pytest.raises(MemberConfigError, match="topic_names"):
        Subscribed(("foo", ""))


def test_subscribing_to_nothing_unsubscribes() -> None:
    rig = ShareRig()
    rig.join()
    rig.handle(Subscribed(()))
    assert rig.state in (S.PREPARE_LEAVING, S.LEAVING)
    assert rig.member.topic_names == ()
