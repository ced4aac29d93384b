"""ShareGroupHeartbeat v1 against a real Kafka 4.x broker: the codec, and the share core on it.

The first test speaks the raw protocol (join, heartbeat until assigned, delta, leave). The second
drives :class:`consumer.share.ShareMember` through the real coordinator: its commands go through
the codec and a socket, the responses come back through the codec as its inputs; the data plane
is a recorder that answers at once. It joins, is dropped by the coordinator for missing
heartbeats (a pause longer than the session timeout), stops and flushes, rejoins with the same
member id, and closes with the leave heartbeat.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from confluent_kafka.admin import AdminClient, ConfigResource

from consumer._runtime.cluster import ClusterClient
from consumer._wire.share_heartbeat import (
    ShareHeartbeatResult,
    build_share_heartbeat_request,
    parse_share_heartbeat_response,
)
from consumer.errors import ConsumerError
from consumer.member.inputs import CoordinatorChanged, CoordinatorLost, HeartbeatTransportFailed
from consumer.member.partitions import TopicIdPartition, flatten_assignment
from consumer.share import (
    ApplyShareAssignment,
    CloseRequested,
    SendShareHeartbeat,
    ShareAssignmentApplied,
    ShareCommand,
    ShareHeartbeatFailed,
    ShareHeartbeatRequest,
    ShareHeartbeatSucceeded,
    ShareInput,
    ShareMember,
    ShareMemberConfig,
    ShareState,
    StopAndFlush,
    StoppedAndFlushed,
    Subscribed,
)
from consumer.share.commands import FindCoordinator, ReportError, ShutDown

pytestmark = pytest.mark.integration

COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
COORDINATOR_RETRIABLE = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
STEP_BOUND_S = 30.0


@pytest_asyncio.fixture
async def cluster(kafka_bootstrap: str) -> AsyncIterator[ClusterClient]:
    async with ClusterClient(kafka_bootstrap, request_timeout_ms=10_000) as client:
        yield client


async def share_heartbeat(
    cluster: ClusterClient, request: ShareHeartbeatRequest
) -> ShareHeartbeatResult:
    response = await cluster.coordinator_request(
        request.group_id, build_share_heartbeat_request(request)
    )
    return parse_share_heartbeat_response(response)


def session_timeout_ms(admin: AdminClient, node_id: int) -> int:
    """The broker's ``group.share.session.timeout.ms`` (the test broker sets it low)."""
    resource = ConfigResource("BROKER", str(node_id))
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return int(configs["group.share.session.timeout.ms"].value)


@pytest.mark.asyncio
async def test_raw_share_heartbeats_join_get_every_partition_and_leave(
    cluster: ClusterClient, create_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = create_topic(partitions=2)
    topic_id = (await cluster.metadata([topic])).topic_ids_by_name()[topic]
    group_id = unique_name("share")
    member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()

    join = ShareHeartbeatRequest(group_id, member_id, 0, None, (topic,))
    result = await share_heartbeat(cluster, join)
    attempts = 1
    while result.error is not None and result.error.code in COORDINATOR_RETRIABLE:
        # A fresh broker may still be loading the coordinator's state or electing the leader of
        # the group's __consumer_offsets partition: the protocol says look the coordinator up
        # again and retry after a backoff (100 ms, as the member's first backoff).
        assert attempts < 100, f"the coordinator never became ready: {result.error}"
        await asyncio.sleep(0.1)
        if result.error.code != COORDINATOR_LOAD_IN_PROGRESS:
            await cluster.find_coordinator(group_id, refresh=True)
        result = await share_heartbeat(cluster, join)
        attempts += 1
    assert result.error is None, result.error
    assert result.member_epoch >= 1
    assert result.heartbeat_interval_ms > 0
    epoch = result.member_epoch
    assigned = dict(result.assignment or {})

    async def converge() -> None:
        nonlocal epoch, result
        while assigned.get(topic_id, frozenset()) != frozenset({0, 1}):
            # The broker's heartbeat interval is the protocol's own schedule.
            await asyncio.sleep(result.heartbeat_interval_ms / 1000)
            result = await share_heartbeat(
                cluster, ShareHeartbeatRequest(group_id, member_id, epoch)
            )
            assert result.error is None, result.error
            epoch = result.member_epoch
            if result.assignment is not None:
                assigned.clear()
                assigned.update(result.assignment)

    await asyncio.wait_for(converge(), STEP_BOUND_S)
    assert result.member_id == member_id, "the member id is the client's"

    leave = await share_heartbeat(cluster, ShareHeartbeatRequest(group_id, member_id, -1))
    assert leave.error is None, leave.error
    assert leave.member_epoch == -1
    gone = await share_heartbeat(cluster, ShareHeartbeatRequest(group_id, member_id, epoch))
    assert gone.error is not None
    assert gone.error.code == UNKNOWN_MEMBER_ID


@dataclass
class CoreDriver:
    """Runs a ShareMember against the real coordinator; the data plane only records."""

    member: ShareMember
    cluster: ClusterClient
    fetching: set[TopicIdPartition] = field(default_factory=set)
    flushes: list[tuple[TopicIdPartition, ...]] = field(default_factory=list)
    sent: list[ShareHeartbeatRequest] = field(default_factory=list)
    answers: list[ShareInput] = field(default_factory=list)
    reports: list[ReportError] = field(default_factory=list)
    shut_down: bool = False
    started: float = field(default_factory=time.monotonic)

    def now_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    async def feed(self, event: ShareInput) -> None:
        """Hand ``event`` to the member and carry out what it asks (answers fed back in turn)."""
        await self._carry_out(self.member.handle(event, self.now_ms()))

    async def _carry_out(self, commands: list[ShareCommand]) -> None:
        pending = list(commands)
        while pending:
            answer = await self._execute(pending.pop(0))
            if answer is not None:
                self.answers.append(answer)
                pending += self.member.handle(answer, self.now_ms())

    async def run_until(self, done: Callable[[], bool], what: str) -> None:
        async def loop() -> None:
            while not done():
                commands, deadline_ms = self.member.poll(self.now_ms())
                await self._carry_out(commands)
                if not commands and not done():
                    wait_ms = 50 if deadline_ms is None else deadline_ms - self.now_ms()
                    # Wake at the member's own deadline (heartbeat interval, backoff).
                    await asyncio.sleep(min(max(wait_ms, 0), 1_000) / 1000)

        try:
            await asyncio.wait_for(loop(), STEP_BOUND_S)
        except TimeoutError:
            pytest.fail(f"{what}: not reached; state {self.member.state.name}, {self.answers[-3:]}")

    async def _execute(self, command: ShareCommand) -> ShareInput | None:
        group_id = self.member.config.group_id
        match command:
            case FindCoordinator():
                try:
                    location = await self.cluster.find_coordinator(group_id, refresh=True)
                except ConsumerError as exc:
                    return CoordinatorLost(str(exc))
                return CoordinatorChanged(location.node_id)
            case SendShareHeartbeat(request_id=request_id, request=request):
                self.sent.append(request)
                try:
                    result = await share_heartbeat(self.cluster, request)
                except ConsumerError as exc:
                    return HeartbeatTransportFailed(request_id, str(exc))
                if result.error is not None:
                    return ShareHeartbeatFailed(
                        request_id, result.error.code, result.error.broker_message
                    )
                assignment = result.assignment
                return ShareHeartbeatSucceeded(
                    request_id,
                    result.member_epoch,
                    result.heartbeat_interval_ms,
                    None if assignment is None else flatten_assignment(assignment),
                    result.member_id,
                )
            case StopAndFlush(request_id=request_id, partitions=partitions):
                self.fetching -= set(partitions)
                self.flushes.append(partitions)
                return StoppedAndFlushed(request_id)
            case ApplyShareAssignment(request_id=request_id, assigned=assigned):
                self.fetching = set(assigned)
                return ShareAssignmentApplied(request_id)
            case ReportError():
                self.reports.append(command)
            case ShutDown():
                self.shut_down = True
        return None


@pytest.mark.asyncio
async def test_the_share_core_joins_is_dropped_for_missing_heartbeats_rejoins_and_leaves(
    cluster: ClusterClient,
    admin: AdminClient,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(partitions=2)
    topic_id = (await cluster.metadata([topic])).topic_ids_by_name()[topic]
    both = {TopicIdPartition(topic_id, 0), TopicIdPartition(topic_id, 1)}
    fired: list[str] = []
    member = ShareMember(
        ShareMemberConfig(group_id=unique_name("share")),
        random.SystemRandom(),
        lambda _previous, rule: fired.append(rule.key),
    )
    driver = CoreDriver(member, cluster)
    await driver.feed(Subscribed((topic,)))

    def fetching_both() -> bool:
        return member.state is ShareState.STABLE and driver.fetching == both

    await driver.run_until(fetching_both, "joined and fetching both partitions")
    first_epoch = member.member_epoch
    assert first_epoch >= 1
    join = driver.sent[0]
    assert (join.member_epoch, join.subscribed_topic_names) == (0, (topic,))
    assert join.member_id == member.member_id
    await driver.run_until(lambda: len(driver.sent) >= 4, "a few more heartbeats")
    assert all(r.subscribed_topic_names is None for r in driver.sent[1:]), "deltas: names null"

    # A pause past the session timeout (the member sends nothing): the coordinator drops it.
    pause_ms = session_timeout_ms(admin, next(iter(cluster.brokers))) + 2_000
    await asyncio.sleep(pause_ms / 1000)
    fenced_at = len(driver.answers)

    def rejoined() -> bool:
        return fetching_both() and any(
            isinstance(a, ShareHeartbeatFailed) for a in driver.answers[fenced_at:]
        )

    await driver.run_until(rejoined, "dropped, flushed and rejoined")
    (failure,) = [a for a in driver.answers[fenced_at:] if isinstance(a, ShareHeartbeatFailed)]
    assert failure.error_code in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH)
    assert "JOINING|RECONCILING|ACKNOWLEDGING|STABLE:FENCED" in fired
    assert "FENCED:RELEASED" in fired
    assert set(driver.flushes[-1]) == both, "stopped and flushed everything before forgetting"
    rejoin = next(r for r in driver.sent[::-1] if r.member_epoch == 0)
    assert rejoin.member_id == member.member_id, "same member id after being dropped"
    assert member.member_epoch >= 1

    await driver.feed(CloseRequested())
    await driver.run_until(lambda: driver.shut_down, "closed")
    assert driver.sent[-1].member_epoch == -1
    assert member.state is ShareState.UNSUBSCRIBED
    assert driver.fetching == set()
    assert driver.reports == []
    gone = await share_heartbeat(
        cluster, ShareHeartbeatRequest(member.config.group_id, member.member_id, first_epoch)
    )
    assert gone.error is not None, "it left the group"
    assert gone.error.code == UNKNOWN_MEMBER_ID
