"""One regression test per real-world KIP-848 client bug class
(docs: /work/shared/reference/perf-reliability-anchors.md §2.7, kip848-client-reference.md §I).

Against the real broker where the bug crosses the network; on the sans-I/O core where the
broker cannot be made to misbehave on demand (STALE_MEMBER_EPOCH on OffsetFetch).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from fleet import (
    Fleet,
)
from reliability_support import (
    CONVERGE_S,
    ProducedLog,
    SteadyProducer,
)
from run_checks import (
    check_run,
    delivered_after_revoke,
    states_of,
)

from consumer.member import (
    ApplyAssignment,
    AppPolled,
    Command,
    CommittedOffsetsFetched,
    CoordinatorChanged,
    FetchCommittedOffsets,
    HeartbeatSucceeded,
    Member,
    MemberConfig,
    MemberState,
    PollIntervalExpired,
    SendHeartbeat,
    StartFetching,
    Subscribed,
)
from consumer.member.partitions import flatten_assignment
from consumer.testing.sim.autopilot import Autopilot, answer_pending
from consumer.testing.timeline_events import FENCE
from tests.support import (
    wait_until,
)

pytestmark = pytest.mark.reliability

MakeFleet = Callable[..., tuple[Fleet, ProducedLog]]
STALE_MEMBER_EPOCH = 113
TOPIC_ID = uuid.UUID(int=0xA)


# ----------------------------------------------------------------------------------------------
# A tiny driver of the sans-I/O core


class Core:
    """Drives one Member like a well-behaved runtime, except where a test says otherwise."""

    def __init__(self, **config: object) -> None:
        self.member = Member(MemberConfig(group_id="g", **config), random.Random(1))  # type: ignore[arg-type]
        self.now = 0
        self.broker_epoch = 1
        self.out: list[Command] = []
        self.fetch_answer: Callable[[FetchCommittedOffsets], CommittedOffsetsFetched] = lambda c: (
            CommittedOffsetsFetched(c.request_id, dict.fromkeys(c.partitions, 42))
        )
        self.autopilot = Autopilot(
            topic_names=lambda c: dict.fromkeys(c.topic_ids, "t"),
            fetch_committed=lambda c: self.fetch_answer(c),
        )

    def handle(self, event: object) -> list[Command]:
        out = self.member.handle(event, self.now)  # type: ignore[arg-type]
        out += self.member.poll(self.now)[0]
        self.out += out
        return out

    def tick(self, ms: int) -> list[Command]:
        self.now += ms
        out = self.member.poll(self.now)[0]
        self.out += out
        return out

    def settle(self) -> None:
        """Answer every command (heartbeats excepted) until nothing is left to answer."""
        answer_pending(self.out, self.answer)

    def answer(self, command: Command) -> None:
        if isinstance(command, SendHeartbeat):
            if command.request.member_epoch > 0:
                self.handle(HeartbeatSucceeded(command.request_id, self.broker_epoch, 500, None))
            return
        event = self.autopilot.answer(command)
        if event is not None:
            self.handle(event)

    def heartbeats(self) -> list[SendHeartbeat]:
        return [c for c in self.out if isinstance(c, SendHeartbeat)]

    def join(self, partitions: tuple[int, ...] = (0, 1)) -> None:
        self.handle(Subscribed(topic_names=("t",)))
        self.handle(AppPolled())
        self.handle(CoordinatorChanged(1))
        join = self.heartbeats()[-1]
        target = flatten_assignment({TOPIC_ID: partitions})
        self.handle(HeartbeatSucceeded(join.request_id, 1, 500, target))


def test_core_retries_stale_epoch_offset_fetch_instead_of_reset() -> None:
    """platformatic/kafka #267, KAFKA-20765: STALE_MEMBER_EPOCH on OffsetFetch must be retried
    (with backoff), never read as "no committed offset" (which falls back to the reset policy
    and skips or re-reads data)."""
    core = Core()
    answers = iter([STALE_MEMBER_EPOCH, STALE_MEMBER_EPOCH, 0])

    def fetch_answer(command: FetchCommittedOffsets) -> CommittedOffsetsFetched:
        code = next(answers, 0)
        if code:
            core.broker_epoch += 1  # the broker moved on: the next heartbeat brings the new epoch
        offsets = dict.fromkeys(command.partitions, None if code else 42)
        return CommittedOffsetsFetched(command.request_id, offsets, error_code=code)

    core.fetch_answer = fetch_answer
    core.join()
    for _ in range(20):
        core.settle()
        core.tick(1_000)  # past any retry backoff
    fetches = [c for c in core.out if isinstance(c, FetchCommittedOffsets)]
    applied = [c for c in core.out if isinstance(c, ApplyAssignment) and c.added]
    assert len(fetches) >= 3, f"the stale-epoch OffsetFetch was not retried: {fetches}"
    assert applied, "the assignment was never applied after the retries"
    started = [c for c in core.out if isinstance(c, StartFetching)]
    assert started, "the partitions never started after the retries"
    for command in started:  # at the committed offsets, no reset-policy follow-up
        assert command.request_id == applied[0].start_request_id, command
        assert command.offsets == dict.fromkeys(applied[0].added, 42), command
        assert command.then_request_id is None, command
    assert core.member.state in (MemberState.STABLE, MemberState.ACK_ASSIGNMENT)


def test_core_rejoin_after_poll_interval_expiry_is_a_full_epoch0_request() -> None:
    """librdkafka #5488/#5541: after max.poll.interval expiry followed quickly by poll(), the
    rejoin must be a full request at epoch 0 (never a partial one the broker refuses with
    INVALID_REQUEST), sent only after the leave."""
    core = Core(max_poll_interval_ms=1_000)
    core.join()
    core.settle()
    before = len(core.out)
    core.handle(PollIntervalExpired())
    core.settle()
    core.handle(AppPolled())  # the application polls again at once
    core.settle()
    core.tick(10)
    later = [c for c in core.out[before:] if isinstance(c, SendHeartbeat)]
    assert later, "no heartbeat after the expiry"
    assert later[0].request.member_epoch == -1, "the leave must come first"
    rejoins = [c for c in later if c.request.member_epoch == 0]
    assert rejoins, [c.request for c in later]
    assert rejoins[0].request.is_full, rejoins[0].request
    assert rejoins[0].request.topic_partitions == (), rejoins[0].request


# ----------------------------------------------------------------------------------------------
# Against the broker


def test_no_commit_succeeds_for_a_partition_after_its_revocation(
    make_fleet: MakeFleet, admin: AdminClient, show: Callable[[str], None]
) -> None:
    """Stale-epoch commit after revocation (node-rdkafka #1146, getsentry/arroyo #419): a commit
    of a partition made after the member's on_revoke returned must be refused (not sent, or
    rejected by the broker), and the broker must not hold the bogus offset."""
    fleet, produced = make_fleet(6)
    produced.produce(600)
    keeper = fleet.spawn("m1", late_commit_revoked=True)
    fleet.wait_converged()
    fleet.wait_all_processed(produced, 60)
    fleet.spawn("m2")
    fleet.wait_converged()
    wait_until(lambda: keeper.view.side_events("late_commit"), CONVERGE_S, "the late commits")
    late = keeper.view.side_events("late_commit")
    produced.produce(200)
    fleet.wait_all_processed(produced, 60)
    fleet.stop_all()
    result = check_run(fleet, produced)
    show(result.counts_line("regression_stale_commit_after_revoke"))
    accepted = [e for e in late if e["outcome"] == "accepted"]
    assert not accepted, f"commits of revoked partitions succeeded: {accepted}"
    request = ConsumerGroupTopicPartitions(
        fleet.group, [TopicPartition(fleet.topic, p) for p in range(6)]
    )
    listed = admin.list_consumer_group_offsets([request])[fleet.group].result(30)
    bogus = {(t, p): o for t, p, o in (e["partition"] for e in late)}
    for tp in listed.topic_partitions:
        assert bogus.get((tp.topic, tp.partition)) != tp.offset, f"bogus offset stored: {tp}"
    assert not result.problems, "\n".join(result.problems[:30])


def test_no_record_returned_after_its_revocation_started(
    make_fleet: MakeFleet, show: Callable[[str], None]
) -> None:
    """Dekaf #1265, KAFKA-20332/20321: no record of a partition is returned by poll() once its
    on_revoke (or on_lost) started, across several rebalances under a steady flow of records."""
    fleet, produced = make_fleet(6)
    produced.produce(500)
    fleet.spawn("m1")
    fleet.wait_converged()
    steady = SteadyProducer(produced, 4000, 12.0)
    steady.start()
    for slot in ("m2", "m3"):
        fleet.spawn(slot)
        fleet.wait_converged()
    fleet.by_slot("m2").leave()
    fleet.wait_converged()
    fleet.spawn("m2")
    fleet.wait_converged()
    steady.join(120)
    fleet.wait_all_processed(produced, 90)
    fleet.stop_all()
    revocations = len(fleet.side_events("revoke_start"))
    result = check_run(fleet, produced)
    result.extra["revocations"] = revocations
    show(result.counts_line("regression_records_after_revoke"))
    assert revocations >= 4, "the run did not exercise revocations"
    assert delivered_after_revoke(fleet) == []
    assert not result.problems, "\n".join(result.problems[:30])


def test_member_taking_over_starts_at_the_committed_offset(
    make_fleet: MakeFleet, show: Callable[[str], None]
) -> None:
    """The end-to-end side of the stale OffsetFetch bug: a member taking partitions over starts
    exactly at the offset the previous owner committed (no reset to earliest/latest)."""
    fleet, produced = make_fleet(4)
    first = fleet.spawn("m1")
    fleet.wait_converged()
    produced.produce(800)
    fleet.wait_all_processed(produced, 60)
    first.leave()
    produced.produce(400)
    second = fleet.spawn("m2")
    fleet.wait_converged()
    fleet.wait_all_processed(produced, 60)
    fleet.stop_all()
    committed: dict[int, int] = {}
    for line in first.view.lines:
        if line["type"] == "commit":
            committed[line["partition"]] = max(line["offset"], committed.get(line["partition"], 0))
    started: dict[int, int] = {}
    for line in second.view.lines:
        if line["type"] == "processed":
            started.setdefault(line["partition"], line["offset"])
    result = check_run(fleet, produced)
    show(result.counts_line("regression_takeover_starts_at_commit"))
    assert started == committed, f"first offsets {started} != committed {committed}"
    assert not result.problems, "\n".join(result.problems[:30])


def test_on_assign_raising_once_does_not_stall_reconciliation(
    make_fleet: MakeFleet, show: Callable[[str], None]
) -> None:
    """KAFKA-16185/20860-style stuck reconciliation: on_assign raising once surfaces the
    exception from poll(), and the member still reaches STABLE and consumes everything."""
    fleet, produced = make_fleet(4)
    produced.produce(600)
    member = fleet.spawn("m1", assign_raise_once=True)
    fleet.wait_converged()
    fleet.wait_all_processed(produced, 60)
    fleet.spawn("m2")
    fleet.wait_converged()
    produced.produce(300)
    fleet.wait_all_processed(produced, 60)
    fleet.stop_all()
    raised = member.view.side_events("exception")
    result = check_run(fleet, produced)
    show(result.counts_line("regression_on_assign_raises_once"))
    assert any("on purpose" in e["error"] for e in raised), raised
    assert "STABLE" in states_of(member)
    assert not result.problems, "\n".join(result.problems[:30])


def test_poll_timeout_leave_then_quick_poll_rejoins_cleanly(
    make_fleet: MakeFleet, show: Callable[[str], None]
) -> None:
    """librdkafka #5488/#5541: max.poll.interval.ms expiry followed at once by poll(): the member
    leaves, rejoins with a full epoch-0 request and is STABLE again; never INVALID_REQUEST, never
    FATAL. Twice in a row."""
    fleet, produced = make_fleet(4, config={"max.poll.interval.ms": 3000})
    produced.produce(400)
    # m2 first, and the group settled, so that m1 never owes a revocation during a gap: the
    # coordinator's own rebalance timeout (also 3 s) would then race m1's poll timer and fence it
    # (FENCED, not the poll-timeout leave this test is about; seen once in CI).
    fleet.spawn("m2")
    fleet.wait_converged(CONVERGE_S)
    member = fleet.spawn("m1", poll_gaps_s=[4.5, 4.5])
    wait_until(
        lambda: len([g for g in member.view.side_events("gap") if g["phase"] == "end"]) == 2,
        90,
        "two poll gaps",
        fleet.describe,
    )
    produced.produce(400)
    fleet.wait_converged(CONVERGE_S)
    fleet.wait_all_processed(produced, 60)
    fleet.stop_all()
    errors = [e for e in member.view.side_events("error") if "INVALID_REQUEST" in e["text"]]
    for gap in member.view.side_events("gap"):
        if gap["phase"] == "start":
            # The member leaves when max.poll.interval (3 s) expires, counted from its last
            # poll(), which precedes the gap by at most one batch and its commit (< 1 s).
            left = gap["at_ms"] + 3000 - 1000
            fleet.fault(FENCE, member.name, left, left)
    result = check_run(fleet, produced)
    show(result.counts_line("regression_poll_timeout_rejoin"))
    states = states_of(member)
    assert states.count("STALE") >= 2, states
    assert "FATAL" not in states
    assert not errors, errors
    assert not result.problems, "\n".join(result.problems[:30])
