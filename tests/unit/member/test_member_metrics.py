"""MemberMetrics on a manual clock: rebalances, heartbeats, commits, partitions, state times."""

from __future__ import annotations

import gc
import json

import pytest

from consumer._client.metrics import (
    STATS_KEY,
    add_member_stats,
    member_metrics,
    with_member_stats,
)
from consumer.member import (
    ApplyAssignment,
    CommitCompleted,
    CommitOffsets,
    HeartbeatFailed,
    HeartbeatRequest,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    MemberState,
    SendHeartbeat,
    TopicPartition,
)
from consumer.member.commands import CommitReason
from consumer.member.metrics import METRIC_NAMES, STATE_TIME_PREFIX, MemberMetrics

S = MemberState
TP0, TP1, TP2 = (TopicPartition("t", p) for p in range(3))


def _heartbeat(request_id: int) -> SendHeartbeat:
    return SendHeartbeat(request_id, HeartbeatRequest(group_id="g", member_id="m", member_epoch=1))


def _commit(request_id: int) -> CommitOffsets:
    return CommitOffsets(request_id, CommitReason.AUTO, "g", "m", 1, {TP0: 5})


def _walk(metrics: MemberMetrics, *steps: tuple[int, MemberState]) -> None:
    for now_ms, state in steps:
        metrics.state_changed(state, now_ms)


def test_a_fresh_member_reports_every_key_with_nothing_happened() -> None:
    values = MemberMetrics(1_000).snapshot(1_000, member_epoch=0)
    state_keys = {STATE_TIME_PREFIX + s.name for s in MemberState}
    assert set(values) == set(METRIC_NAMES) | state_keys
    assert values["rebalance-total"] == 0
    assert values["last-rebalance-seconds-ago"] == -1
    assert values["last-heartbeat-seconds-ago"] == -1
    assert values["heartbeat-rate"] == 0
    assert member_metrics(None) == MemberMetrics(0).snapshot(0, member_epoch=0)


def test_a_join_then_a_revoke_count_two_rebalances_with_their_latencies() -> None:
    metrics = MemberMetrics(0)
    # join: JOINING at 100, reconciling from 300, STABLE at 700 -> a 400 ms rebalance
    _walk(metrics, (100, S.JOINING), (300, S.RECONCILE_ASSIGNMENT), (500, S.ACK_ASSIGNMENT))
    _walk(metrics, (700, S.STABLE))
    # a new target: reconciling from 10_700 to 11_900 -> 1_200 ms
    _walk(metrics, (10_700, S.RECONCILE_ASSIGNMENT), (11_000, S.ACK_ASSIGNMENT))
    _walk(metrics, (11_900, S.STABLE))
    values = metrics.snapshot(14_900, member_epoch=3)
    assert values["rebalance-total"] == 2
    assert values["rebalance-latency-max"] == 1_200
    assert values["rebalance-latency-total"] == 1_600
    assert values["rebalance-latency-avg"] == 800
    assert values["last-rebalance-seconds-ago"] == pytest.approx(3.0)
    assert values["failed-rebalance-total"] == 0
    # two rebalances in the 14.9 s lived (less than the hour window): per hour
    assert values["rebalance-rate-per-hour"] == pytest.approx(2 * 3_600_000 / 14_900)
    assert values["member-epoch"] == 3
    assert values["state-transitions-total"] == 7


def test_time_in_each_state_includes_the_current_stay() -> None:
    metrics = MemberMetrics(0)
    _walk(metrics, (100, S.JOINING), (300, S.RECONCILE_ASSIGNMENT), (700, S.STABLE))
    _walk(metrics, (1_700, S.RECONCILE_ASSIGNMENT), (1_800, S.STABLE))
    values = metrics.snapshot(5_000, member_epoch=1)
    assert values[STATE_TIME_PREFIX + "UNSUBSCRIBED"] == 100
    assert values[STATE_TIME_PREFIX + "JOINING"] == 200
    assert values[STATE_TIME_PREFIX + "RECONCILE_ASSIGNMENT"] == 400 + 100
    assert values[STATE_TIME_PREFIX + "STABLE"] == 1_000 + 3_200
    assert sum(values[STATE_TIME_PREFIX + s.name] for s in MemberState) == 5_000


def test_fencing_mid_rebalance_counts_a_failed_rebalance_not_a_completed_one() -> None:
    metrics = MemberMetrics(0)
    _walk(metrics, (0, S.JOINING), (100, S.RECONCILE_ASSIGNMENT), (2_100, S.FENCED))
    _walk(metrics, (2_200, S.JOINING), (2_300, S.RECONCILE_ASSIGNMENT), (2_800, S.STABLE))
    values = metrics.snapshot(3_000, member_epoch=5)
    assert values["failed-rebalance-total"] == 1
    assert values["rebalance-total"] == 1
    assert values["rebalance-latency-max"] == 500  # the fenced attempt is not a latency


def test_heartbeat_response_times_rate_and_last_sent() -> None:
    metrics = MemberMetrics(0)
    for request_id, (sent_ms, answered_ms) in enumerate(
        [(0, 30), (5_000, 5_120), (10_000, 10_045)]
    ):
        metrics.command_issued(_heartbeat(request_id), sent_ms)
        answer = (
            HeartbeatFailed(request_id, 27)
            if request_id == 1
            else HeartbeatSucceeded(request_id, 1, 5_000)
        )
        metrics.input_received(answer, answered_ms)
    metrics.command_issued(_heartbeat(9), 15_000)
    metrics.input_received(HeartbeatTransportFailed(9, "gone"), 18_000)  # no response: no time
    values = metrics.snapshot(20_000, member_epoch=1)
    assert values["heartbeat-total"] == 3
    assert values["heartbeat-response-time-max"] == 120
    assert values["heartbeat-rate"] == pytest.approx(3 / 20)
    assert values["last-heartbeat-seconds-ago"] == pytest.approx(5.0)


def test_heartbeat_rate_forgets_responses_older_than_its_window() -> None:
    metrics = MemberMetrics(0)
    metrics.command_issued(_heartbeat(1), 0)
    metrics.input_received(HeartbeatSucceeded(1, 1, 5_000), 10)
    metrics.command_issued(_heartbeat(2), 100_000)
    metrics.input_received(HeartbeatSucceeded(2, 1, 5_000), 100_010)
    values = metrics.snapshot(120_000, member_epoch=1)
    assert values["heartbeat-rate"] == pytest.approx(1 / 60)
    assert values["heartbeat-total"] == 2


def test_commit_latency_average_and_maximum() -> None:
    metrics = MemberMetrics(0)
    metrics.command_issued(_commit(1), 1_000)
    metrics.command_issued(_commit(2), 1_500)
    metrics.input_received(CommitCompleted(2, {TP0: 0}), 1_520)
    metrics.input_received(CommitCompleted(1, {TP0: 0}), 1_080)
    metrics.input_received(CommitCompleted(77, {TP0: 0}), 1_100)  # not ours: ignored
    values = metrics.snapshot(2_000, member_epoch=1)
    assert values["commit-total"] == 2
    assert values["commit-latency-max"] == 80
    assert values["commit-latency-avg"] == 50


def test_partitions_assigned_revoked_lost_and_owned() -> None:
    metrics = MemberMetrics(0)
    metrics.command_issued(ApplyAssignment(1, (TP0, TP1, TP2), (TP0, TP1, TP2), ()), 10)
    metrics.command_issued(InvokeOnAssign(2, (TP0, TP1, TP2)), 10)
    metrics.command_issued(InvokeOnRevoke(3, (TP2,)), 20)
    metrics.command_issued(ApplyAssignment(4, (TP0, TP1), (), (TP2,)), 20)
    assert metrics.snapshot(25, member_epoch=2)["assigned-partitions"] == 2
    metrics.command_issued(InvokeOnLost(5, (TP0, TP1)), 30)
    values = metrics.snapshot(40, member_epoch=0)
    assert values["partitions-assigned-total"] == 3
    assert values["partitions-revoked-total"] == 1
    assert values["partitions-lost-total"] == 2
    assert values["assigned-partitions"] == 0


def test_the_stats_json_gains_the_member_metrics_under_one_key() -> None:
    stats = json.dumps({"name": "rdkafka#consumer-1", "ts": 5, "brokers": {}})
    merged = json.loads(add_member_stats(stats, {"rebalance-total": 2.0}))
    assert merged[STATS_KEY] == {"rebalance-total": 2.0}
    assert merged["name"] == "rdkafka#consumer-1"
    assert merged["brokers"] == {}
    assert json.loads(add_member_stats(" {} ", {"a": 1.0})) == {STATS_KEY: {"a": 1.0}}
    assert add_member_stats("[]", {"a": 1.0}) == "[]"


def test_stats_cb_gets_the_member_metrics_and_does_not_keep_the_consumer_alive() -> None:
    received: list[str] = []

    class Owner:
        def metrics(self) -> dict[str, float]:
            return {"rebalance-total": 4.0}

    assert with_member_stats({"x": 1}, Owner().metrics) == {"x": 1}  # no stats_cb: unchanged
    owner = Owner()
    settings = with_member_stats({"stats_cb": received.append}, owner.metrics)
    settings["stats_cb"]('{"name": "c"}')
    assert json.loads(received[-1]) == {STATS_KEY: {"rebalance-total": 4.0}, "name": "c"}
    del owner
    gc.collect()
    settings["stats_cb"]('{"name": "c"}')
    assert received[-1] == '{"name": "c"}'  # its consumer is gone: librdkafka's JSON as is
