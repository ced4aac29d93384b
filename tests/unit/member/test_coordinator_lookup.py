"""Failed coordinator lookups: fatal codes end the member, others retry after a backoff."""

from __future__ import annotations

import pytest
from member_rig import MemberRig

from consumer.member import (
    AppPolled,
    CoordinatorChanged,
    CoordinatorLost,
    FindCoordinator,
    MemberState,
    ReportError,
    SendHeartbeat,
    Subscribed,
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
