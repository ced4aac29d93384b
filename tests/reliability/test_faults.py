"""One fault per test against member processes, each behind its own FaultProxy.

Every test records the run, checks it with ``consumer.testing.invariants.check`` (plus the tier's
own checks: no record of a partition processed after its revocation began, every produced value
seen, nothing FATAL) and prints the counts. Bounds are multiples of the broker's heartbeat
interval (500 ms) and session timeout (6 s).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fleet import (
    Fleet,
)
from member_processes import (
    MemberProcess,
)
from reliability_support import (
    CONVERGE_S,
    HEARTBEAT_MS,
    SESSION_MS,
    ProducedLog,
    SteadyProducer,
    relaunch_broker,
)
from run_checks import (
    RunResult,
    callbacks_of,
    check_run,
    states_of,
)

from consumer.testing.real.proxy import ProxiedBroker
from consumer.testing.timeline_events import wall_clock_ms
from tests.support import (
    wait_until,
)

pytestmark = pytest.mark.reliability

MakeFleet = Callable[..., tuple[Fleet, ProducedLog]]
SESSION_S = SESSION_MS / 1000
HEARTBEAT_S = HEARTBEAT_MS / 1000
#: After a member's session expired, the others own its partitions within this bound.
TAKEOVER_S = SESSION_S + 20 * HEARTBEAT_S
#: A short fault: a third of the session timeout (four heartbeat intervals).
SHORT_S = SESSION_S / 3
#: Quiet period after a short fault in which the other members must see no callback at all.
QUIET_S = 6 * HEARTBEAT_S


def finish(
    fleet: Fleet,
    produced: ProducedLog,
    show: Callable[[str], None],
    name: str,
    *,
    more: int = 500,
    rebalance_timeout_ms: int | None = None,
) -> RunResult:
    """Produce ``more`` records, wait until everything is processed and the group is stable,
    close every member, check the run and print its counts."""
    produced.produce(more)
    fleet.wait_all_processed(produced, 90)
    fleet.wait_converged()
    fleet.stop_all()
    result = check_run(fleet, produced, rebalance_timeout_ms=rebalance_timeout_ms)
    show(result.counts_line(name))
    assert not result.problems, "\n".join(result.problems[:30])
    return result


def test_sigkill_mid_reconciliation(make_fleet: MakeFleet, show: Callable[[str], None]) -> None:
    """A member SIGKILLed inside on_revoke (mid-reconciliation) loses its partitions to the
    others after the session timeout; nothing is lost, duplicates only in its uncommitted window."""
    fleet, produced = make_fleet(6)
    produced.produce(1500)
    victim = fleet.spawn("m1", revoke_delay_s=5.0)  # a revocation that takes a while
    other = fleet.spawn("m2")
    fleet.wait_converged()
    joined_at = wall_clock_ms()
    newcomer = fleet.spawn("m3")  # the join makes the victim revoke
    wait_until(
        lambda: any(e["at_ms"] >= joined_at for e in victim.view.side_events("revoke_start")),
        CONVERGE_S,
        "the victim's on_revoke to start",
        fleet.describe,
    )
    fleet.kill(victim)
    took = fleet.wait_converged(TAKEOVER_S + CONVERGE_S, members=[other, newcomer])
    result = finish(fleet, produced, show, "sigkill_mid_reconciliation")
    assert took <= TAKEOVER_S + 10, f"took {took:.1f} s to converge after the kill"
    assert result.report.records_processed >= result.report.records_produced


def test_graceful_leaves_and_joins(make_fleet: MakeFleet, show: Callable[[str], None]) -> None:
    """Clean leaves (close()) and joins hand partitions over with commits: exactly once, no
    on_lost anywhere, the group converges after each change."""
    fleet, produced = make_fleet(6)
    produced.produce(1000)
    first = [fleet.spawn(slot) for slot in ("m1", "m2", "m3")]
    fleet.wait_converged()
    first[2].leave()
    produced.produce(300)
    fleet.wait_converged()
    fleet.spawn("m4")
    produced.produce(300)
    fleet.wait_converged()
    first[0].leave()
    fleet.spawn("m3")
    fleet.wait_converged()
    result = finish(fleet, produced, show, "graceful_leaves_and_joins")
    assert result.report.duplicates == 0, "a graceful handoff must not redeliver"
    assert not fleet.side_events("lost_start"), "a graceful run must not lose partitions"


def fenced_and_covered(fleet: Fleet, victim: MemberProcess, other: MemberProcess) -> bool:
    """The fault has lasted "longer than the session" only once the broker has really expired
    the victim (its log says so) and the other member is STABLE: on a loaded machine the
    coordinator's session timer can fire well after the nominal timeout."""
    fenced = any(name == victim.name for name, _at, _reason in fleet.broker_fences())
    return fenced and fleet.converged([other])


def test_pause_longer_than_session(make_fleet: MakeFleet, show: Callable[[str], None]) -> None:
    """A member frozen (SIGSTOP) past the session timeout is fenced: the other member takes its
    partitions meanwhile; once resumed it gets on_lost, rejoins and becomes STABLE again."""
    fleet, produced = make_fleet(6)
    produced.produce(1000)
    frozen, other = fleet.spawn("m1"), fleet.spawn("m2")
    fleet.wait_converged()
    start, end = fleet.pause(
        frozen, SESSION_S, until=lambda: fenced_and_covered(fleet, frozen, other), max_s=TAKEOVER_S
    )
    wait_until(lambda: frozen.view.side_events("lost_start"), CONVERGE_S, "on_lost after resume")
    took = fleet.wait_converged()
    result = finish(fleet, produced, show, "pause_longer_than_session")
    assert "FENCED" in states_of(frozen, end), states_of(frozen)
    assert states_of(frozen)[-1] in ("STABLE", "UNSUBSCRIBED"), states_of(frozen)
    assert took <= CONVERGE_S
    assert result.report.lost_records == 0


def test_pause_shorter_than_session(make_fleet: MakeFleet, show: Callable[[str], None]) -> None:
    """A pause of a third of the session timeout causes no rebalance: no callback in any member,
    no state change, consumption goes on."""
    fleet, produced = make_fleet(6)
    produced.produce(1000)
    frozen, other = fleet.spawn("m1"), fleet.spawn("m2")
    fleet.wait_converged()
    fleet.wait_all_processed(produced, 60)
    start, end = fleet.pause(frozen, SHORT_S)
    produced.produce(300)
    fleet.wait_all_processed(produced, 60)
    wait_until(lambda: wall_clock_ms() >= end + QUIET_S * 1000, QUIET_S + 5, "the quiet period")
    assert not callbacks_of(other, start), callbacks_of(other, start)
    assert not callbacks_of(frozen, start), callbacks_of(frozen, start)
    assert states_of(other, start) == []
    assert states_of(frozen, start) == []
    finish(fleet, produced, show, "pause_shorter_than_session")


def test_blackhole_longer_than_session(make_fleet: MakeFleet, show: Callable[[str], None]) -> None:
    """A member cut off from the broker past the session timeout is fenced; the other takes over
    during the cut; after healing it gets on_lost, rejoins and the group converges."""
    fleet, produced = make_fleet(6)
    produced.produce(1000)
    cut, other = fleet.spawn("m1"), fleet.spawn("m2")
    fleet.wait_converged()
    fleet.blackhole(
        cut, SESSION_S, until=lambda: fenced_and_covered(fleet, cut, other), max_s=TAKEOVER_S
    )
    wait_until(lambda: cut.view.side_events("lost_start"), CONVERGE_S, "on_lost after healing")
    fleet.wait_converged()
    finish(fleet, produced, show, "blackhole_longer_than_session")
    assert states_of(cut)[-1] in ("STABLE", "UNSUBSCRIBED"), states_of(cut)


def test_blackhole_shorter_than_session(make_fleet: MakeFleet, show: Callable[[str], None]) -> None:
    """A network cut of a third of the session timeout causes no rebalance anywhere."""
    fleet, produced = make_fleet(6)
    produced.produce(1000)
    cut, other = fleet.spawn("m1"), fleet.spawn("m2")
    fleet.wait_converged()
    fleet.wait_all_processed(produced, 60)
    start, end = fleet.blackhole(cut, SHORT_S)
    produced.produce(300)
    fleet.wait_all_processed(produced, 60)
    wait_until(lambda: wall_clock_ms() >= end + QUIET_S * 1000, QUIET_S + 5, "the quiet period")
    assert not callbacks_of(other, start), callbacks_of(other, start)
    assert not callbacks_of(cut, start), callbacks_of(cut, start)
    assert "FENCED" not in states_of(cut, start), states_of(cut, start)
    finish(fleet, produced, show, "blackhole_shorter_than_session")


def test_broker_restart_mid_consumption(
    make_fleet: MakeFleet, cluster: ProxiedBroker, show: Callable[[str], None]
) -> None:
    """The broker SIGKILLed and restarted on the same data while records flow: members recover
    without FATAL, every record is processed, the group converges."""
    fleet, produced = make_fleet(6)
    produced.produce(500)
    members = [fleet.spawn("m1"), fleet.spawn("m2")]
    fleet.wait_converged()
    steady = SteadyProducer(produced, 2000, 10.0)
    steady.start()
    wait_until(lambda: sum(m.refresh().processed for m in members) > 600, 30, "consumption")
    down, up = relaunch_broker(cluster.broker, hard=True)
    fleet.fault("broker_restart", None, down, up)
    took = fleet.wait_converged(CONVERGE_S + SESSION_S)
    steady.join(120)
    result = finish(fleet, produced, show, "broker_restart_mid_consumption")
    result.extra["restart_s"] = round((up - down) / 1000, 1)
    result.extra["stable_after_s"] = round(took, 1)
    show(result.counts_line("broker_restart_mid_consumption (timing)"))


def test_coordinator_errors_during_restart_retried_with_backoff(
    make_fleet: MakeFleet, cluster: ProxiedBroker, show: Callable[[str], None]
) -> None:
    """While the broker restarts (SIGTERM, then start on the same data) the member meets refused
    connections and coordinator errors (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR...): it
    retries with backoff (a bounded rate of its own control-plane connection attempts, counted
    inside the member process), never goes FATAL and is STABLE again within a bound after the
    broker is back."""
    fleet, produced = make_fleet(4)
    produced.produce(400)
    member = fleet.spawn("m1")
    fleet.wait_converged()
    down, up = relaunch_broker(cluster.broker, hard=False)
    fleet.fault("broker_restart", None, down, up)
    took = fleet.wait_converged(CONVERGE_S + SESSION_S)
    connects = member.view.side_events("connect")
    attempts = sum(1 for event in connects if down <= event["at_ms"] <= up)
    rate = attempts / max(1.0, (up - down) / 1000)
    result = finish(fleet, produced, show, "coordinator_errors_during_restart")
    result.extra.update(
        connect_attempts=attempts, per_s=round(rate, 1), stable_after_s=round(took, 1)
    )
    show(result.counts_line("coordinator_errors_during_restart (timing)"))
    assert rate <= 10, f"{attempts} connection attempts in {(up - down) / 1000:.1f} s: no backoff"
    assert "FATAL" not in states_of(member)
    assert took <= CONVERGE_S


def test_slow_on_revoke_past_rebalance_timeout(
    make_fleet: MakeFleet, show: Callable[[str], None]
) -> None:
    """An on_revoke slower than the rebalance timeout (max.poll.interval.ms = 5000): the broker
    fences the member meanwhile and gives the partitions away; the member's commit after the
    timeout is refused; it then loses the rest, rejoins and is STABLE again, never FATAL."""
    rebalance_ms = 5000
    fleet, produced = make_fleet(6, config={"max.poll.interval.ms": rebalance_ms})
    produced.produce(1200)
    slow = fleet.spawn("m1", revoke_delay_s=rebalance_ms / 1000 + 3)
    fleet.wait_converged()
    fleet.wait_all_processed(produced, 60)
    other = fleet.spawn("m2")
    wait_until(lambda: slow.view.side_events("slow_revoke"), CONVERGE_S, "the slow on_revoke")
    wait_until(
        lambda: fleet.converged([other]) or fleet.converged([slow, other]),
        CONVERGE_S,
        "the other member to take over",
        fleet.describe,
    )
    fleet.wait_converged(CONVERGE_S + SESSION_S)
    result = finish(fleet, produced, show, "slow_on_revoke", rebalance_timeout_ms=rebalance_ms)
    refused = [e for e in slow.view.side_events("commit_failed") if e["where"] == "revoke"]
    assert refused, "the commit made after the rebalance timeout must be refused"
    assert set(states_of(slow)) & {"FENCED", "STALE"}, states_of(slow)
    assert "FATAL" not in states_of(slow)
    assert result.report.lost_records == 0
