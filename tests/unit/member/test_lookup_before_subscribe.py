"""An UNSUBSCRIBED member looks the coordinator up, so that a later join goes out at once.

Java's AsyncKafkaConsumer (its CoordinatorRequestManager) and librdkafka look the coordinator up
from construction whenever a group id is set; the member core does the same in UNSUBSCRIBED
(``StateInfo.finds_coordinator``), without heartbeats and without reporting failures.
"""

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
    Unsubscribed,
)
from consumer.member.pacing import finds_coordinator
from consumer.member.states import STATES, Heartbeats
from consumer.share.states import SHARE_STATES

GROUP_AUTHORIZATION_FAILED = 30
GROUP_ID_NOT_FOUND = 69
SASL_AUTHENTICATION_FAILED = 58


def lookups(commands: list[object]) -> list[FindCoordinator]:
    return [c for c in commands if isinstance(c, FindCoordinator)]


def heartbeats(commands: list[object]) -> list[SendHeartbeat]:
    return [c for c in commands if isinstance(c, SendHeartbeat)]


def test_a_new_member_looks_the_coordinator_up_once_and_sends_no_heartbeat() -> None:
    r = MemberRig()
    first = r.poll()
    assert lookups(first) == [FindCoordinator("g")]
    assert not heartbeats(first)
    r.advance(60_000)
    assert r.poll() == [], "one lookup in flight at a time, no heartbeat while unsubscribed"
    r.handle(CoordinatorChanged(1))
    r.advance(60_000)
    assert r.poll() == [], "nothing more to do once the coordinator is known"
    assert r.deadline() is None
    assert r.member.state is MemberState.UNSUBSCRIBED


def test_the_join_heartbeat_goes_out_on_the_first_poll_when_the_coordinator_is_known() -> None:
    r = MemberRig()
    r.poll()
    r.handle(CoordinatorChanged(1))
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    out = r.poll()
    assert not lookups(out), "the coordinator was found before subscribe()"
    (join,) = heartbeats(out)
    assert join.request.member_epoch == 0


def test_a_subscribe_during_the_early_lookup_waits_for_it_without_a_second_one() -> None:
    r = MemberRig()
    assert lookups(r.poll())
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    assert r.poll() == [], "the lookup in flight is not repeated"
    r.handle(CoordinatorChanged(1))
    assert len(heartbeats(r.poll())) == 1


def test_a_failed_early_lookup_waits_quietly_for_the_join_which_looks_up_at_once() -> None:
    r = MemberRig()
    assert lookups(r.poll())
    assert r.handle(CoordinatorLost("connection refused")) == [], "nothing is reported"
    assert r.deadline() is None, "no retry while unsubscribed: the loop may sleep"
    r.advance(600_000)
    assert r.poll() == []
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    assert lookups(r.poll()), "the join looks up at once, not after a backoff"
    r.handle(CoordinatorLost("connection refused"))
    (report,) = r.all(ReportError)
    assert (report.error_name, report.fatal) == ("COORDINATOR_UNAVAILABLE", False)
    assert r.member.state is MemberState.JOINING
    deadline = r.deadline()
    assert deadline is not None, "in JOINING a failed lookup is retried after the backoff"
    r.advance(deadline - r.now)
    assert lookups(r.poll())
    r.handle(CoordinatorChanged(1))
    assert len(heartbeats(r.poll())) == 1
    assert not r.all(SendHeartbeat)[0].request.member_epoch


def test_a_refused_early_lookup_is_decided_by_the_joins_lookup() -> None:
    r = MemberRig()
    r.poll()
    r.handle(CoordinatorLost("refused", error_code=GROUP_AUTHORIZATION_FAILED))
    assert r.member.state is MemberState.UNSUBSCRIBED
    assert not r.all(ReportError)
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    assert lookups(r.poll())
    r.handle(CoordinatorLost("refused", error_code=GROUP_AUTHORIZATION_FAILED))
    assert r.member.state is MemberState.FATAL, "as a member that never looked up early"


def test_a_coordinator_lost_after_leaving_is_looked_up_again_only_at_the_next_join() -> None:
    r = MemberRig()
    r.join()
    r.handle(CoordinatorLost("connection closed"))  # while JOINING: looked up again
    assert r.member.state is MemberState.JOINING
    r.handle(Unsubscribed())
    assert r.member.state is MemberState.UNSUBSCRIBED
    r.advance(r.config.retry_backoff_max_ms * 2)
    assert lookups(r.poll()), "a silent member still wants the coordinator"
    r.handle(CoordinatorLost("connection refused"))
    r.advance(600_000)
    assert not lookups(r.poll())


def test_only_unsubscribed_looks_up_without_heartbeats() -> None:
    silent_lookups = {
        state for state, info in STATES.items() if info.heartbeats is Heartbeats.NONE
    } & {state for state, info in STATES.items() if finds_coordinator(info)}
    assert silent_lookups == {MemberState.UNSUBSCRIBED}
    assert not [info for info in SHARE_STATES.values() if info.finds_coordinator], (
        "the share member looks up only when it heartbeats"
    )


def test_a_fatal_member_stops_looking_up() -> None:
    r = MemberRig()
    r.poll()
    r.handle(CoordinatorChanged(1))
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    r.poll()
    r.handle(CoordinatorLost("refused", error_code=GROUP_AUTHORIZATION_FAILED))
    assert r.member.state is MemberState.FATAL
    r.advance(60_000)
    assert not lookups(r.poll())


@pytest.mark.parametrize("code", [GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND])
def test_a_refused_lookup_in_a_silent_state_changes_nothing(code: int) -> None:
    r = MemberRig()
    r.join()
    r.handle(CoordinatorLost("refused", error_code=GROUP_AUTHORIZATION_FAILED))
    assert r.member.state is MemberState.FATAL
    reports = len(r.all(ReportError))
    assert r.handle(CoordinatorLost("refused again", error_code=code)) == []
    assert r.member.state is MemberState.FATAL
    assert len(r.all(ReportError)) == reports
    r.advance(60_000)
    assert not lookups(r.poll())


@pytest.mark.parametrize("code", [None, SASL_AUTHENTICATION_FAILED])
def test_a_lookup_from_before_the_join_that_fails_after_it_is_made_again_at_once(
    code: int | None,
) -> None:
    """E.g. built with a wrong password, corrected with set_sasl_credentials() and subscribed
    while the first lookup was still in flight: its failure must not end (or delay) the join."""
    r = MemberRig()
    assert lookups(r.poll())
    r.handle(Subscribed(topic_names=("foo",)))
    r.handle(AppPolled())
    assert r.poll() == []
    again = r.handle(CoordinatorLost("authentication failed", error_code=code))
    assert lookups(again), "looked up again at once, with what the join knows now"
    assert r.member.state is MemberState.JOINING
    assert not r.all(ReportError), "nothing reported: this is the join's first lookup"
    r.handle(CoordinatorLost("authentication failed", error_code=code))
    if code is None:
        assert r.member.state is MemberState.JOINING
        assert len(r.all(ReportError)) == 1, "the join's own failure is reported, as before"
    else:
        assert r.member.state is MemberState.FATAL, "the join's own refusal is final, as before"
