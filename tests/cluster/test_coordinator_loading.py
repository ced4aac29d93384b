"""The group coordinator answers COORDINATOR_LOAD_IN_PROGRESS for a while, as one that is still
loading its ``__consumer_offsets`` partition does after a move (``test_broker_faults.py``
measures those real loads: milliseconds to about a second on this cluster, too short to study).

The members reach the brokers through the brokers' fault proxies; the coordinator's proxy
answers every ConsumerGroupHeartbeat itself with that error, for half the session timeout, while
records flow. The heartbeats never reach the broker, as they would not reach a group that is not
loaded yet. What must hold, as for Java's and librdkafka's consumers: the error is retriable and
surfaces nowhere; the members retry with backoff (not in a tight loop), keep their assignment
and keep consuming; no callback runs, no member is fenced; once the coordinator answers again
the group is STABLE at once; nothing is lost and no commit goes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_fleet import member_errors
from reliability_support import CONVERGE_S, HEARTBEAT_MS, SESSION_MS, SteadyProducer
from run_checks import callbacks_of, check_run, states_of

from consumer.testing.real.proxied_cluster import ProxiedCluster
from consumer.testing.timeline_events import wall_clock_ms

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 6
SLOTS = ("m1", "m2", "m3")
REBALANCE_MS = 5_000
CONSUMER_GROUP_HEARTBEAT = 68
COORDINATOR_LOAD_IN_PROGRESS = 14
LOADING_S = SESSION_MS / 2000


def test_coordinator_answering_load_in_progress_for_half_the_session(
    cluster: ProxiedCluster, make_cluster_fleet: Callable[..., tuple[Any, Any]]
) -> None:
    fleet, produced = make_cluster_fleet(
        PARTITIONS, proxied_slots=SLOTS, config={"max.poll.interval.ms": REBALANCE_MS}
    )
    produced.produce(600)
    members = [fleet.spawn(slot) for slot in SLOTS]
    fleet.wait_converged(CONVERGE_S * 2)
    fleet.wait_all_processed(produced, 60)
    proxy = cluster.proxy(cluster.coordinator_of(fleet.group))
    answered_before = proxy.stats().answered
    producer = SteadyProducer(produced, 1_500, seconds=8.0)
    producer.start()

    start = wall_clock_ms()
    proxy.answer_with_error(CONSUMER_GROUP_HEARTBEAT, COORDINATOR_LOAD_IN_PROGRESS)
    processed_before = sum(m.refresh().processed for m in members)
    time.sleep(LOADING_S)  # the fault itself: held this long
    processed_during = sum(m.refresh().processed for m in members) - processed_before
    proxy.heal()
    end = wall_clock_ms()
    answered = proxy.stats().answered - answered_before
    fleet.fault("load_in_progress", None, start, end)
    stable_after_s = fleet.wait_converged(CONVERGE_S)

    producer.finish(120)
    assert producer.done.is_set(), "the producer did not finish"
    unknown_offsets = produced.resolve_unknown_offsets()
    fleet.wait_all_processed(produced, 120)
    surfaced = member_errors(fleet, start)
    for member in members:
        seen = callbacks_of(member, start)
        assert not seen, f"{member.name} got callbacks while the coordinator loaded: {seen}"
        assert states_of(member, start) == [], f"{member.name}: {states_of(member, start)}"
    live_at_end = len(fleet.live())
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=REBALANCE_MS)
    # Retries back off: fewer answers than three members heartbeating every interval would get.
    every_interval = len(SLOTS) * LOADING_S * 1000 / HEARTBEAT_MS
    result.extra.update(
        loading_s=LOADING_S,
        producer_pace_cut_s=round(producer.pace_cut_s, 1),
        answered=answered,
        answered_at_the_heartbeat_rate=round(every_interval),
        processed_while_loading=processed_during,
        stable_after_s=round(stable_after_s, 1),
        surfaced=dict(surfaced),
        acked_without_offset=unknown_offsets,
    )
    print(result.counts_line("coordinator loading"))  # noqa: T201
    assert not result.problems, "\n".join(result.problems[:30])
    assert result.report.lost_records == 0
    assert result.report.double_owned == 0
    assert result.report.commit_regressions == 0
    assert result.report.duplicates == 0, "nobody was fenced, so nothing is redone"
    assert answered >= len(SLOTS), f"each member's heartbeat was answered: {answered}"
    assert answered <= 2 * every_interval, f"retried in a tight loop: {answered} answers"
    assert processed_during > 0, "members kept consuming while the coordinator loaded"
    assert stable_after_s <= 2 * HEARTBEAT_MS / 1000, "STABLE within two heartbeat intervals"
    assert live_at_end == len(SLOTS), "a member process died"
