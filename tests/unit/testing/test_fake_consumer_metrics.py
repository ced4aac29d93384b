"""FakeConsumer.metrics(): the real member core and the real metrics, on simulated time."""

from __future__ import annotations

from consumer.testing import FakeConsumer, SimCluster

TOPIC = "orders"


def _poll_until(fakes: list[FakeConsumer], done: object, polls: int = 200) -> None:
    for _ in range(polls):
        if callable(done) and done():
            return
        for fake in fakes:
            fake.poll(0.1)
    raise AssertionError("the simulated group did not settle")


def test_metrics_count_a_join_a_revoke_and_the_time_in_each_state() -> None:
    cluster = SimCluster(seed=3)
    cluster.create_topic(TOPIC, 4)
    config = {"group.id": "g", "auto.offset.reset": "earliest"}
    first = cluster.consumer(config)
    assert first.metrics()["rebalance-total"] == 0
    subscribed_ms = cluster.clock.now_ms
    first.subscribe([TOPIC])
    _poll_until([first], lambda: first.state == "STABLE" and len(first.assignment()) == 4)
    joined = first.metrics()
    assert joined["rebalance-total"] == 1
    assert joined["partitions-assigned-total"] == 4
    assert joined["assigned-partitions"] == 4
    assert joined["member-epoch"] == first.member_epoch
    assert joined["heartbeat-total"] >= 1
    state_times = [v for k, v in joined.items() if k.startswith("time-in-state-ms.")]
    assert sum(state_times) == cluster.clock.now_ms - subscribed_ms  # simulated time, all of it
    assert joined["time-in-state-ms.STABLE"] > 0

    second = cluster.consumer(config)
    second.subscribe([TOPIC])
    _poll_until(
        [first, second],
        lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2
        and first.state == second.state == "STABLE",
    )  # fmt: skip
    shared = first.metrics()
    assert shared["rebalance-total"] == 2
    assert shared["partitions-revoked-total"] == 2
    assert shared["assigned-partitions"] == 2
    assert shared["rebalance-latency-max"] > 0
    assert shared["failed-rebalance-total"] == 0
    assert second.metrics()["rebalance-total"] == 1
