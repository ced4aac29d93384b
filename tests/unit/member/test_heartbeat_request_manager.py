"""HeartbeatRequestManager: member id, field inclusion, scheduling and backoff."""

from __future__ import annotations

import random

import pytest
from member_rig import BAR, FOO, MemberRig

from consumer.member import (
    AppPolled,
    CoordinatorChanged,
    HeartbeatSucceeded,
    MemberConfig,
    MemberState,
    SendHeartbeat,
    Subscribed,
    generate_member_id,
)
from consumer.member.heartbeat import ExponentialBackoff


def test_member_id_is_22_url_safe_chars_not_starting_with_dash() -> None:
    ids = {generate_member_id(random.Random(seed)) for seed in range(300)}
    assert len(ids) == 300
    for member_id in ids:
        assert len(member_id) == 22
        assert not member_id.startswith("-")
        assert set(member_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_member_id_redraws_zero_and_dash_prefixed_values() -> None:
    class Scripted(random.Random):
        def __init__(self) -> None:
            super().__init__(0)
            self.values = [bytes(16), b"\xf8" + bytes(15), b"\x01" * 16]

        def randbytes(self, n: int) -> bytes:
            return self.values.pop(0)

    assert generate_member_id(Scripted()) == "AQEBAQEBAQEBAQEBAQEBAQ"


def test_join_request_is_full_with_empty_owned_partitions() -> None:
    r = MemberRig(instance_id="i-1", rack_id="rack-a", server_assignor="uniform")
    join = r.join(("foo", "bar")).request
    assert join.member_epoch == 0
    assert join.member_id == r.member.member_id
    assert join.subscribed_topic_names == ("bar", "foo")
    assert join.subscribed_topic_regex is None
    assert (join.instance_id, join.rack_id, join.server_assignor) == ("i-1", "rack-a", "uniform")
    assert join.rebalance_timeout_ms == 300_000
    assert join.topic_partitions == ()
    assert join.is_full


def test_later_heartbeats_carry_only_what_changed() -> None:
    r = MemberRig(instance_id="i-1", rack_id="rack-a", server_assignor="uniform")
    ack = r.stable({FOO: (0,)}).request
    assert ack.topic_partitions is not None
    assert ack.topic_partitions[0].partitions == (0,)
    assert (ack.rack_id, ack.rebalance_timeout_ms, ack.subscribed_topic_names) == (None, -1, None)
    assert ack.instance_id == "i-1"  # on every heartbeat, as Java
    assert ack.server_assignor is None
    r.advance(5_000)
    keepalive = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0].request
    assert keepalive.topic_partitions is None
    assert keepalive.subscribed_topic_names is None
    r.handle(HeartbeatSucceeded(r.last(SendHeartbeat).request_id, 1, 5_000))
    r.handle(Subscribed(topic_names=("foo", "bar")))
    r.advance(5_000)
    changed = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0].request
    assert changed.subscribed_topic_names == ("bar", "foo")
    assert changed.topic_partitions is None


def test_switching_between_regex_and_names_clears_the_other_field() -> None:
    r = MemberRig()
    r.handle(Subscribed(topic_regex="foo.*"))
    r.handle(AppPolled())
    r.poll()
    r.handle(CoordinatorChanged(1))
    join = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert join.request.subscribed_topic_regex == "foo.*"
    assert join.request.subscribed_topic_names is None
    r.respond(join, 1, {})
    assert r.member.state is MemberState.STABLE
    r.handle(Subscribed(topic_names=("bar",)))
    r.advance(5_000)
    names = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert names.request.subscribed_topic_names == ("bar",)
    assert names.request.subscribed_topic_regex == ""
    r.handle(HeartbeatSucceeded(names.request_id, 1, 5_000))
    r.handle(Subscribed(topic_regex="b.*"))
    r.advance(5_000)
    regex = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    assert regex.request.subscribed_topic_regex == "b.*"
    assert regex.request.subscribed_topic_names == ()


def test_interval_from_the_response_is_used_and_non_positive_values_ignored() -> None:
    r = MemberRig()
    r.stable({FOO: (0,)})
    r.handle(HeartbeatSucceeded(r.last(SendHeartbeat).request_id, 1, 3_000))
    r.advance(5_000)
    first = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatSucceeded(first.request_id, 1, 8_000))
    r.advance(7_999)
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]
    r.advance(1)
    second = [c for c in r.poll() if isinstance(c, SendHeartbeat)][0]
    r.handle(HeartbeatSucceeded(second.request_id, 1, 0))
    assert r.member.heartbeats.interval_ms == 8_000


def test_a_new_interval_counts_from_the_send_not_from_a_slow_answer() -> None:
    # The join's answer waits for the coordinator's log write; the next heartbeat (the one that
    # usually brings a joiner its partitions) is due one interval after the join went out, as
    # librdkafka counts it, not one interval after the answer.
    r = MemberRig()
    join = r.join()
    r.advance(300)
    r.handle(HeartbeatSucceeded(join.request_id, 1, 500))
    r.poll()
    assert r.member.state is MemberState.STABLE
    r.advance(199)
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]
    r.advance(1)
    assert [c for c in r.poll() if isinstance(c, SendHeartbeat)]


def test_an_answer_slower_than_the_interval_lets_the_next_heartbeat_go_at_once() -> None:
    r = MemberRig()
    join = r.join()
    r.advance(700)
    r.handle(HeartbeatSucceeded(join.request_id, 1, 500))
    assert [c for c in r.poll() if isinstance(c, SendHeartbeat)]


def test_only_one_heartbeat_in_flight() -> None:
    r = MemberRig()
    r.join()
    r.advance(60_000)
    r.handle(AppPolled())
    assert not [c for c in r.poll() if isinstance(c, SendHeartbeat)]


def test_backoff_doubles_to_the_cap_with_jitter_bounds() -> None:
    backoff = ExponentialBackoff(100, 1_000, 0.2, random.Random(3))
    for attempts, term in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1_000), (12, 1_000)]:
        delay = backoff.delay_ms(attempts)
        assert term * 0.8 <= delay <= term * 1.2
    assert ExponentialBackoff(100, 1_000, 0.0, random.Random(3)).delay_ms(2) == 200


@pytest.mark.parametrize("static", [False, True])
def test_leave_epoch_is_minus_one_or_minus_two_for_static_members(static: bool) -> None:
    from consumer.member import Unsubscribed

    r = MemberRig(instance_id="i-9" if static else None)
    r.stable({FOO: (0,), BAR: (1,)})
    r.handle(Unsubscribed())
    r.answer_everything()
    leave = r.last(SendHeartbeat)
    assert leave.is_leave
    assert leave.request.member_epoch == (-2 if static else -1)
    assert r.member.state is MemberState.UNSUBSCRIBED


def test_config_rejects_invalid_values() -> None:
    from consumer.member import MemberConfigError

    with pytest.raises(MemberConfigError):
        MemberConfig(group_id="")
    with pytest.raises(MemberConfigError):
        MemberConfig(group_id="g", instance_id="")
    with pytest.raises(MemberConfigError):
        MemberConfig(group_id="g", rebalance_timeout_ms=0)
    with pytest.raises(MemberConfigError):
        MemberConfig(group_id="g", retry_backoff_ms=500, retry_backoff_max_ms=100)
    with pytest.raises(MemberConfigError):
        MemberConfig(group_id="g", retry_backoff_jitter=1.5)
    with pytest.raises(MemberConfigError):
        Subscribed()
    with pytest.raises(MemberConfigError):
        Subscribed(topic_regex="")
