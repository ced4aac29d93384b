"""One test per heartbeat error code (reference section C), on a STABLE member owning foo-0/1."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode
from member_rig import FOO, MemberRig

from consumer.member import (
    HEARTBEAT_ERROR_ACTIONS,
    CallbackCompleted,
    CommitOffsets,
    ErrorCode,
    FindCoordinator,
    HeartbeatErrorAction,
    HeartbeatFailed,
    HeartbeatTransportFailed,
    InvokeOnLost,
    MemberState,
    ReportError,
    SendHeartbeat,
    TopicPartition,
    Unsubscribed,
    heartbeat_error_action,
)
from consumer.member.errors_table import error_name

OWNED = (TopicPartition("foo", 0), TopicPartition("foo", 1))
FATAL_CODES = [c for c, a in HEARTBEAT_ERROR_ACTIONS.items() if a is HeartbeatErrorAction.FATAL]


def stable_member_with_heartbeat_in_flight() -> tuple[MemberRig, SendHeartbeat]:
    r = MemberRig()
    r.stable({FOO: (0, 1)})
    r.advance(5_000)
    heartbeat = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    return r, heartbeat


def test_table_covers_every_code_named_by_the_reference() -> None:
    expected = {14, 15, 16, 25, 29, 30, 35, 42, 69, 81, 82, 110, 111, 112, 128}
    assert {int(code) for code in HEARTBEAT_ERROR_ACTIONS} == expected
    assert heartbeat_error_action(9_999) is HeartbeatErrorAction.FATAL


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fencing_errors_release_as_lost_and_rejoin_with_the_same_id(code: int) -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    member_id = r.member.member_id
    commits_before = len(r.all(CommitOffsets))
    r.handle(HeartbeatFailed(heartbeat.request_id, code))
    assert r.member.state is MemberState.FENCED
    assert r.member.member_epoch == 0
    lost = r.last(InvokeOnLost)
    assert lost.partitions == OWNED
    assert len(r.all(CommitOffsets)) == commits_before  # lost never commits
    r.handle(CallbackCompleted(lost.request_id))
    assert r.member.state is MemberState.JOINING
    rejoin = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert rejoin.request.member_epoch == 0
    assert rejoin.request.member_id == member_id
    assert rejoin.request.topic_partitions == ()
    assert rejoin.request.is_full


@pytest.mark.parametrize(
    "code", [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, None]
)
def test_coordinator_errors_rediscover_and_retry_with_a_full_request(code: int | None) -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    if code is None:
        out = r.handle(HeartbeatTransportFailed(heartbeat.request_id, "reset by peer"))
    else:
        out = r.handle(HeartbeatFailed(heartbeat.request_id, code))
    assert any(isinstance(c, FindCoordinator) for c in out)
    assert r.member.state is MemberState.STABLE
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]  # coordinator unknown
    from consumer.member import CoordinatorChanged

    r.handle(CoordinatorChanged(3))
    r.advance(1_000)
    retry = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert retry.request.is_full
    assert retry.request.member_epoch == 1


def test_load_in_progress_backs_off_then_sends_a_full_request() -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    r.handle(HeartbeatFailed(heartbeat.request_id, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    assert r.member.state is MemberState.STABLE
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]  # backoff, jitter 0.8-1.2
    r.advance(79)
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]
    r.advance(41)
    retry = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert retry.request.is_full


def test_topic_authorization_failed_is_reported_but_not_fatal() -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    r.handle(HeartbeatFailed(heartbeat.request_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no"))
    report = r.last(ReportError)
    assert (report.error_code, report.fatal, report.message) == (29, False, "no")
    assert r.member.state is MemberState.STABLE
    r.advance(1_000)
    assert [c for c in r.poll() if isinstance(c, SendHeartbeat)]


@pytest.mark.parametrize("code", [*FATAL_CODES, ErrorCode.GROUP_ID_NOT_FOUND, 9_999])
def test_fatal_errors_surface_and_release_as_lost(code: int) -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    r.handle(HeartbeatFailed(heartbeat.request_id, code))
    assert r.member.state is MemberState.FATAL
    report = r.last(ReportError)
    assert report.fatal
    assert report.error_code == code
    assert r.last(InvokeOnLost).partitions == OWNED
    r.advance(60_000)
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]


def test_group_id_not_found_while_leaving_completes_the_leave() -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    r.handle(Unsubscribed())
    assert r.member.state is MemberState.UNSUBSCRIBING
    r.handle(HeartbeatFailed(heartbeat.request_id, ErrorCode.GROUP_ID_NOT_FOUND))
    assert r.member.state is MemberState.UNSUBSCRIBED
    assert not any(isinstance(c, ReportError) and c.fatal for c in r.commands)


def test_fencing_while_leaving_skips_the_leave_heartbeat() -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    r.handle(Unsubscribed())
    sent = len(r.all(SendHeartbeat))
    r.handle(HeartbeatFailed(heartbeat.request_id, ErrorCode.FENCED_MEMBER_EPOCH))
    assert r.member.state is MemberState.UNSUBSCRIBED
    assert len(r.all(SendHeartbeat)) == sent


def test_fatal_error_while_leaving_does_not_call_on_lost() -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    r.handle(Unsubscribed())
    r.handle(HeartbeatFailed(heartbeat.request_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    assert r.member.state is MemberState.FATAL
    assert not r.all(InvokeOnLost)


def test_answers_to_unknown_or_leave_requests_are_ignored() -> None:
    r, heartbeat = stable_member_with_heartbeat_in_flight()
    assert r.handle(HeartbeatFailed(heartbeat.request_id + 1000, 110)) == []
    assert r.member.state is MemberState.STABLE


def test_the_members_codes_are_kios_under_upper_case_names() -> None:
    for code in ErrorCode:
        kio_code = KioErrorCode(int(code))
        assert (code.name, int(code)) == (kio_code.name.upper(), int(kio_code))


def test_error_name_names_every_kio_code_and_marks_unknown_ones() -> None:
    for kio_code in KioErrorCode:
        assert error_name(int(kio_code)) == kio_code.name.upper()
    assert error_name(int(ErrorCode.FENCED_MEMBER_EPOCH)) == "FENCED_MEMBER_EPOCH"
    assert error_name(9999) == "UNKNOWN_ERROR_9999"
