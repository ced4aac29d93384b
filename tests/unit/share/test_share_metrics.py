"""``ShareMetrics`` (``ShareConsumer.metrics()``) on a manual clock: what each feed counts."""

from __future__ import annotations

import pytest

from consumer._share_runtime.metrics import SHARE_METRIC_NAMES, ShareMetrics
from consumer.member.metrics import STATE_TIME_PREFIX
from consumer.share.states import ShareState


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_new_member_has_every_key_at_zero(clock: Clock) -> None:
    snapshot = ShareMetrics(clock).snapshot(member_epoch=0)
    states = {STATE_TIME_PREFIX + state.name for state in ShareState}
    assert set(snapshot) == set(SHARE_METRIC_NAMES) | states
    assert snapshot["last-heartbeat-seconds-ago"] == -1
    assert snapshot["last-rebalance-seconds-ago"] == -1
    assert {k: v for k, v in snapshot.items() if not k.endswith("seconds-ago")} == dict.fromkeys(
        set(snapshot) - {"last-heartbeat-seconds-ago", "last-rebalance-seconds-ago"}, 0
    )


def test_states_rebalances_heartbeats_acknowledgements_and_commits(clock: Clock) -> None:
    metrics = ShareMetrics(clock)
    for state, after_ms in (
        (ShareState.JOINING, 100),
        (ShareState.RECONCILING, 40),
        (ShareState.ACKNOWLEDGING, 10),
        (ShareState.STABLE, 0),
    ):
        metrics.state_is(state)
        metrics.state_is(state)  # the same state again changes nothing
        clock.now_ms += after_ms
    metrics.assignment_applied(3)
    sent_ms = clock()
    metrics.heartbeat_sent()
    clock.now_ms += 25
    metrics.heartbeat_answered(sent_ms)
    metrics.acknowledged({("t", 0): frozenset({1, 2, 3}), ("t", 1): frozenset({7})}, failed=False)
    metrics.acknowledged({("t", 0): frozenset({4})}, failed=True)
    started_ms = clock()
    clock.now_ms += 30
    metrics.commit_completed(started_ms)
    clock.now_ms += 1_000
    snapshot = metrics.snapshot(member_epoch=4)

    assert snapshot["state-transitions-total"] == 4
    assert snapshot[STATE_TIME_PREFIX + "UNSUBSCRIBED"] == 0
    assert snapshot[STATE_TIME_PREFIX + "JOINING"] == 100
    assert snapshot[STATE_TIME_PREFIX + "RECONCILING"] == 40
    assert snapshot[STATE_TIME_PREFIX + "STABLE"] == 25 + 30 + 1_000
    assert (snapshot["rebalance-total"], snapshot["rebalance-latency-max"]) == (1, 50)
    assert snapshot["heartbeat-total"] == 1
    assert snapshot["heartbeat-response-time-max"] == 25
    assert snapshot["last-heartbeat-seconds-ago"] == pytest.approx(1.055)
    assert snapshot["acknowledgement-send-total"] == 5
    assert snapshot["acknowledgement-error-total"] == 1
    lived_s = (100 + 40 + 10 + 25 + 30 + 1_000) / 1000
    assert snapshot["acknowledgement-send-rate"] == pytest.approx(5 / lived_s)
    assert (snapshot["commit-total"], snapshot["commit-latency-avg"]) == (1, 30)
    assert snapshot["assigned-partitions"] == 3
    assert snapshot["member-epoch"] == 4

    metrics.state_is(ShareState.FENCED)
    assert metrics.snapshot(member_epoch=0)["assigned-partitions"] == 0
    clock.now_ms += 61_000  # the rates cover the last 60 s
    later = metrics.snapshot(member_epoch=0)
    assert later["acknowledgement-send-rate"] == 0
    assert later["acknowledgement-send-total"] == 5
