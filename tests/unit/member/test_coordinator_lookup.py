"""Failed coordinator lookups: fatal codes end the member, others retry after a backoff."""

from __future__ import annotations

import pytest
from member_rig import FOO, MemberRig

from consumer.member import (
    AppPolled,
    CoordinatorChanged,
    CoordinatorLost,
    FindCoordinator,
    InvokeOnLost,
    MemberState,
    ReportError,
    SendHeartbeat,
    Subscribed,
    Unsubscribed,
)

GROUP_AUTHORIZATION_FAILED = 30
SASL_AUTHENTICATION_FAILED = 58
COORDINATOR_NOT_AVAILABLE = 15


def joining_member() -> MemberRig:
    r = MemberRig()
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    assert [c for c in r.poll() if isinstance(c, FindCoordinator)]
    return r


@pytest.mark.parametrize("code", [GROUP_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED])
def test_a_refused_lookup_is_fatal_and_reported(code: int) -> None:
    r = joining_member()
    r.handle(CoordinatorLost("refused by the broker", error_code=code))
    assert r.member.state is MemberState.FATAL
    report = r.last(ReportError)
    assert (report.error_code, report.fatal) == (code, True)
    r.advance(10_000)
    assert not [c for c in r.poll() if isinstance(c, FindCoordinator | SendHeartbeat)]


@pytest.mark.parametrize("code", [None, COORDINATOR_NOT_AVAILABLE])
def test_a_failed_lookup_is_retried_after_a_growing_backoff_and_reported_once(
    code: int | None,
) -> None:
    r = joining_member()
    waits = []
    for _ in range(4):
        out = r.handle(CoordinatorLost("connection refused", error_code=code))
        assert not [c for c in out if isinstance(c, FindCoordinator)], "no tight lookup loop"
        _, deadline = r.member.poll(r.now)
        assert deadline is not None
        assert deadline > r.now
        waits.append(deadline - r.now)
        r.advance(deadline - r.now - 1)
        assert not [c for c in r.poll() if isinstance(c, FindCoordinator)]
        r.advance(1)
        assert [c for c in r.poll() if isinstance(c, FindCoordinator)]
    assert waits[-1] > waits[0], f"backoff grows: {waits}"
    assert max(waits) <= r.config.retry_backoff_max_ms * (1 + r.config.retry_backoff_jitter)
    reports = r.all(ReportError)
    assert len(reports) == 1, "reported once per outage, not once per retry"
    assert reports[0].fatal is False
    assert r.member.state is MemberState.JOINING
    r.handle(CoordinatorChanged(1))
    assert [c for c in r.poll() if isinstance(c, SendHeartbeat)], "joins once it is found"


GROUP_ID_NOT_FOUND = 69


def leaving_member() -> MemberRig:
    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(Unsubscribed())
    assert r.member.state is MemberState.UNSUBSCRIBING
    return r


def test_a_lookup_refused_while_leaving_is_fatal_without_on_lost() -> None:
    r = leaving_member()
    r.handle(CoordinatorLost("refused", error_code=GROUP_AUTHORIZATION_FAILED))
    assert r.member.state is MemberState.FATAL
    assert (r.last(ReportError).error_code, r.last(ReportError).fatal) == (30, True)
    assert not r.all(InvokeOnLost)


def test_group_id_not_found_on_lookup_is_fatal_in_the_group() -> None:
    r = joining_member()
    r.handle(CoordinatorLost("no such group", error_code=GROUP_ID_NOT_FOUND))
    assert r.member.state is MemberState.FATAL
    assert r.last(ReportError).error_name == "GROUP_ID_NOT_FOUND"


def test_group_id_not_found_on_lookup_while_leaving_keeps_looking() -> None:
    r = leaving_member()
    r.handle(CoordinatorLost("no such group", error_code=GROUP_ID_NOT_FOUND))
    assert r.member.state is MemberState.UNSUBSCRIBING
    assert r.last(ReportError).fatal is False
    r.advance(r.config.retry_backoff_max_ms * 2)
    assert [c for c in r.poll() if isinstance(c, FindCoordinator)]


@pytest.mark.parametrize("code", [GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND])
def test_a_refused_lookup_without_heartbeats_changes_nothing(code: int) -> None:
    r = MemberRig()
    out = r.handle(CoordinatorLost("refused", error_code=code))
    assert out == []
    assert r.member.state is MemberState.UNSUBSCRIBED
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    assert r.member.state is MemberState.JOINING, "the member can still join afterwards"
