"""Assignment changes: stop fetching removed partitions and flush their acknowledgements before
the member forgets them, then apply the target; new targets mid-round; late answers."""

from __future__ import annotations

from share_rig import BAR, FOO, ShareRig, parts

from consumer.member.inputs import Unsubscribed
from consumer.share import (
    ApplyShareAssignment,
    SendShareHeartbeat,
    ShareAssignmentApplied,
    ShareState,
    StopAndFlush,
    StoppedAndFlushed,
)

S = ShareState


def test_a_new_target_stops_and_flushes_the_removed_then_applies() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0, 1))
    rig.advance(1_000)
    out = rig.answer(rig.heartbeat(), 2, parts(FOO, 1) | parts(BAR, 0))
    assert rig.state is S.RECONCILING
    assert [type(c) for c in out] == [StopAndFlush], "stop first, nothing applied yet"
    assert rig.last(StopAndFlush).partitions == tuple(parts(FOO, 0))
    assert rig.member.owned == parts(FOO, 0, 1), "still owned until flushed"
    out = rig.flushed()
    apply = rig.of(ApplyShareAssignment, out)[0]
    assert set(apply.assigned) == parts(FOO, 1) | parts(BAR, 0)
    assert apply.added == tuple(parts(BAR, 0))
    assert apply.removed == tuple(parts(FOO, 0))
    rig.applied()
    assert rig.state is S.ACKNOWLEDGING
    assert rig.member.owned == parts(FOO, 1) | parts(BAR, 0)
    ack = rig.heartbeat()
    assert ack.request.member_epoch == 2
    assert rig.state is S.STABLE


def test_only_additions_skip_the_stop() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    out = rig.answer(rig.heartbeat(), 2, parts(FOO, 0, 1))
    assert [type(c) for c in out] == [ApplyShareAssignment]
    assert rig.of(StopAndFlush) == []


def test_a_target_arriving_mid_round_is_reconciled_after_the_acknowledgement() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    rig.answer(rig.heartbeat(), 2, parts(FOO, 0, 1))
    assert rig.state is S.RECONCILING
    rig.advance(1_000)
    rig.answer(rig.heartbeat(), 3, parts(FOO, 1))  # the interval heartbeat of RECONCILING
    assert rig.of(StopAndFlush) == [], "the running round keeps its plan"
    rig.applied()
    assert rig.state is S.ACKNOWLEDGING
    out = rig.poll()
    assert rig.of(SendShareHeartbeat, out), "the acknowledgement"
    assert rig.state is S.RECONCILING, "a newer target waits"
    assert rig.last(StopAndFlush).partitions == tuple(parts(FOO, 0))
    rig.flushed()
    rig.applied()
    assert rig.member.owned == parts(FOO, 1)


def test_late_or_unknown_answers_change_nothing() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    rig.answer(rig.heartbeat(), 2, parts(BAR, 0))
    stop = rig.last(StopAndFlush)
    assert rig.handle(StoppedAndFlushed(stop.request_id + 100)) == []
    assert rig.handle(ShareAssignmentApplied(stop.request_id)) == [], "wrong phase"
    rig.flushed()
    assert rig.flushed() == [], "answered twice"
    assert rig.state is S.RECONCILING


def test_a_release_also_stops_an_assignment_not_yet_confirmed() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    rig.answer(rig.heartbeat(), 2, parts(FOO, 0, 1))
    apply = rig.last(ApplyShareAssignment)
    out = rig.handle(Unsubscribed())
    assert set(rig.of(StopAndFlush, out)[0].partitions) == parts(FOO, 0, 1)
    assert rig.handle(ShareAssignmentApplied(apply.request_id)) == [], "the aborted round"
    rig.flushed()
    assert rig.state is S.LEAVING
    assert rig.member.owned == frozenset()


def test_stale_or_negative_epochs_are_ignored() -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    rig.answer(rig.heartbeat(), 0, parts(BAR, 0))
    assert rig.member.target == parts(FOO, 0)
    assert rig.member.member_epoch == 1
    rig.advance(1_000)
    rig.answer(rig.heartbeat(), -1, parts(BAR, 0))
    assert rig.member.target == parts(FOO, 0)
    assert rig.state is S.STABLE
