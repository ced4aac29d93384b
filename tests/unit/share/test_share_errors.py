"""The share heartbeat error table, and what each error does to the member."""

from __future__ import annotations

import pytest
from share_rig import FOO, ShareRig, parts

from consumer.member.commands import FindCoordinator, ReportError, ShutDown
from consumer.member.errors import FatalMemberError
from consumer.member.errors_table import ErrorCode, HeartbeatErrorAction, heartbeat_error_action
from consumer.member.inputs import (
    CoordinatorChanged,
    CoordinatorLost,
    HeartbeatTransportFailed,
    Unsubscribed,
)
from consumer.share import (
    SHARE_HEARTBEAT_ERROR_ACTIONS,
    CloseRequested,
    SendShareHeartbeat,
    ShareState,
    StopAndFlush,
    Subscribed,
)

S = ShareState
A = HeartbeatErrorAction
FATAL_CODES = (
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
)


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, A.RETRY),
        (ErrorCode.NOT_COORDINATOR, A.REDISCOVER_COORDINATOR),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, A.REDISCOVER_COORDINATOR),
        (ErrorCode.UNKNOWN_MEMBER_ID, A.FENCE),
        (ErrorCode.FENCED_MEMBER_EPOCH, A.FENCE),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, A.REPORT),
        (ErrorCode.GROUP_ID_NOT_FOUND, A.FATAL_UNLESS_LEAVING),
        *((code, A.FATAL) for code in FATAL_CODES),
        (ErrorCode.UNSUPPORTED_ASSIGNOR, A.FATAL),  # not in the table: unexpected, so fatal
        (9_999, A.FATAL),
    ],
)
def test_the_share_error_table(code: int, action: HeartbeatErrorAction) -> None:
    assert heartbeat_error_action(code, SHARE_HEARTBEAT_ERROR_ACTIONS) is action


def test_the_consumer_table_stays_the_default() -> None:
    assert heartbeat_error_action(ErrorCode.UNSUPPORTED_ASSIGNOR) is A.FATAL
    assert heartbeat_error_action(ErrorCode.TOPIC_AUTHORIZATION_FAILED) is A.REPORT


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH])
def test_removed_for_missing_heartbeats_stops_flushes_and_rejoins_with_the_same_id(
    code: int,
) -> None:
    """The coordinator dropped the member after the session timeout (a long pause): the next
    heartbeat is answered UNKNOWN_MEMBER_ID (or FENCED_MEMBER_EPOCH)."""
    rig = ShareRig()
    rig.join(parts(FOO, 0, 1))
    member_id = rig.member.member_id
    rig.advance(60_000)  # a pause longer than any session timeout
    out = rig.fail(rig.heartbeat(), code)
    assert rig.state is S.FENCED
    assert rig.of(StopAndFlush, out)[0].partitions == tuple(sorted(parts(FOO, 0, 1)))
    assert rig.of(SendShareHeartbeat, rig.poll()) == [], "no heartbeat until flushed"
    rig.flushed()
    assert rig.state is S.JOINING
    assert rig.member.owned == frozenset()
    join = rig.heartbeat().request
    assert (join.member_id, join.member_epoch, join.subscribed_topic_names) == (
        member_id,
        0,
        ("foo",),
    )
    rig.answer(rig.of(SendShareHeartbeat)[-1], 5, parts(FOO, 1))
    rig.applied()
    assert rig.member.owned == parts(FOO, 1)


@pytest.mark.parametrize("code", FATAL_CODES)
def test_non_retriable_errors_are_fatal(code: int) -> None:
    rig = ShareRig()
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    out = rig.fail(rig.heartbeat(), code, "no")
    assert rig.state is S.FATAL
    reports = rig.of(ReportError, out)
    assert [(r.error_code, r.fatal) for r in reports] == [(code, True)]
    assert rig.of(StopAndFlush, out), "stops fetching and flushes"
    assert rig.of(SendShareHeartbeat, rig.poll()) == []
    with pytest.raises(FatalMemberError) as error:
        rig.handle(Subscribed(("bar",)))
    assert error.value.error_code == code
    assert rig.handle(CloseRequested()) == [ShutDown()]


def test_group_gone_is_fatal_in_the_group() -> None:
    rig = ShareRig()
    rig.join()
    rig.advance(1_000)
    rig.fail(rig.heartbeat(), ErrorCode.GROUP_ID_NOT_FOUND)
    assert rig.state is S.FATAL


def _preparing_to_leave(rig: ShareRig) -> SendShareHeartbeat:
    """STABLE with a partition, a heartbeat in flight, then unsubscribe (flush pending)."""
    rig.join(parts(FOO, 0))
    rig.advance(1_000)
    in_flight = rig.heartbeat()
    rig.handle(Unsubscribed())
    assert rig.state is S.PREPARE_LEAVING
    return in_flight


def test_fenced_or_group_gone_while_leaving_needs_no_leave_heartbeat() -> None:
    for code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.GROUP_ID_NOT_FOUND):
        rig = ShareRig()
        in_flight = _preparing_to_leave(rig)
        rig.fail(in_flight, code)
        assert rig.state is S.UNSUBSCRIBED
        assert rig.flushed() == []
        assert rig.of(SendShareHeartbeat, rig.poll()) == []


def test_fenced_in_leaving_before_the_leave_went_out() -> None:
    rig = ShareRig()
    in_flight = _preparing_to_leave(rig)
    rig.flushed()
    assert rig.state is S.LEAVING
    rig.fail(in_flight, ErrorCode.FENCED_MEMBER_EPOCH)
    assert rig.state is S.UNSUBSCRIBED
    assert rig.of(SendShareHeartbeat, rig.poll()) == []


def test_a_fatal_error_while_leaving_is_fatal_without_another_flush() -> None:
    rig = ShareRig()
    in_flight = _preparing_to_leave(rig)
    flushes = len(rig.of(StopAndFlush))
    rig.handle(CloseRequested())
    out = rig.fail(in_flight, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert rig.state is S.FATAL
    assert len(rig.of(StopAndFlush)) == flushes
    assert rig.of(ShutDown, out) == [ShutDown()], "close() finishes"


def test_topic_authorization_is_reported_and_the_member_stays() -> None:
    rig = ShareRig()
    rig.join()
    rig.advance(1_000)
    out = rig.fail(rig.heartbeat(), ErrorCode.TOPIC_AUTHORIZATION_FAILED, "denied")
    assert rig.state is S.STABLE
    assert [(r.error_name, r.fatal) for r in rig.of(ReportError, out)] == [
        ("TOPIC_AUTHORIZATION_FAILED", False)
    ]


def test_coordinator_moves_and_transport_failures_rediscover() -> None:
    rig = ShareRig()
    rig.join()
    rig.advance(1_000)
    out = rig.handle(HeartbeatTransportFailed(rig.heartbeat().request_id, "reset"))
    assert rig.of(FindCoordinator, out) == [FindCoordinator("sg")]
    assert rig.of(SendShareHeartbeat, rig.poll()) == []
    rig.handle(CoordinatorChanged(2))
    rig.advance(100)
    full = rig.heartbeat().request
    assert full.subscribed_topic_names == ("foo",), "a full request after the move"


@pytest.mark.parametrize(
    ("code", "state"),
    [
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, S.FATAL),
        (ErrorCode.GROUP_ID_NOT_FOUND, S.FATAL),
        (None, S.STABLE),
    ],
)
def test_a_failed_lookup_in_the_group(code: int | None, state: ShareState) -> None:
    rig = ShareRig()
    rig.join()
    out = rig.handle(CoordinatorLost("down", code))
    assert rig.state is state
    if code is None:
        assert [r.error_name for r in rig.of(ReportError, out)] == ["COORDINATOR_UNAVAILABLE"]
        assert rig.of(FindCoordinator, rig.poll()) == [], "after the backoff"
        rig.advance(100)
        assert rig.of(FindCoordinator, rig.poll()) == [FindCoordinator("sg")]


@pytest.mark.parametrize(
    ("code", "state"),
    [
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, S.FATAL),
        (ErrorCode.GROUP_ID_NOT_FOUND, S.PREPARE_LEAVING),
    ],
)
def test_a_failed_lookup_while_leaving(code: int, state: ShareState) -> None:
    rig = ShareRig()
    _preparing_to_leave(rig)
    rig.handle(CoordinatorLost("refused", code))
    assert rig.state is state


@pytest.mark.parametrize("code", [None, ErrorCode.GROUP_AUTHORIZATION_FAILED, 69])
def test_a_failed_lookup_without_heartbeats_only_waits(code: int | None) -> None:
    rig = ShareRig()
    assert rig.handle(CoordinatorLost("down", code)) == []
    assert rig.state is S.UNSUBSCRIBED
