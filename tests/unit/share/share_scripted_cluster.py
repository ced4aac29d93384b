"""A scripted cluster behind :class:`consumer._share_runtime.transport.ShareTransport`, for the
share data plane's unit tests (no network): each node answers ShareFetch and ShareAcknowledge
from a per-node script of results or exceptions, and a fetch with nothing scripted is answered
empty after a short long-poll; every request is recorded."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from consumer._share_runtime.dataplane import ShareDataPlane
from consumer._share_runtime.events import AcknowledgementsCompleted, FetchedRecord
from consumer._share_runtime.transport import Leaders
from consumer._wire import (
    AcquiredRange,
    BrokerAddress,
    LeaderHint,
    ShareAcknowledgePartition,
    ShareAcknowledgeResult,
    ShareFetchPartition,
    ShareFetchResult,
)
from consumer._wire.records import (
    Compression,
    DecodedRecords,
    Record,
    RecordBatch,
    TimestampType,
)
from consumer.errors import BrokerError, ConsumerError, error_for_code
from consumer.share.acknowledgements import TopicIdPartition
from consumer.share.session import ShareAcknowledgePlan, ShareFetchPlan

TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-0000000000aa")
TOPIC = "orders"
P0 = TopicIdPartition(TOPIC_ID, 0)
P1 = TopicIdPartition(TOPIC_ID, 1)
#: How long an unscripted fetch waits before answering empty (a broker's long poll).
LONG_POLL_S = 0.02
LOCK_TIMEOUT_MS = 30_000

Step = ShareFetchResult | ShareAcknowledgeResult | ConsumerError


def batch(*offsets: int) -> DecodedRecords:
    """One data batch holding a record at each of ``offsets``."""
    records = tuple(
        Record(offset, 0, TimestampType.CREATE_TIME, None, f"v{offset}".encode())
        for offset in offsets
    )
    return DecodedRecords(
        (
            RecordBatch(
                offsets[0],
                offsets[-1],
                0,
                Compression.NONE,
                TimestampType.CREATE_TIME,
                False,
                False,
                -1,
                -1,
                -1,
                0,
                0,
                records,
            ),
        )
    )


def part(
    partition: TopicIdPartition,
    offsets: Iterable[int] = (),
    *,
    error: int = 0,
    acknowledge_error: int = 0,
    leader: LeaderHint | None = None,
    delivery_count: int = 1,
) -> ShareFetchPartition:
    """A ShareFetch response partition acquiring ``offsets`` (one range) for us."""
    numbers = sorted(offsets)
    return ShareFetchPartition(
        topic_id=partition.topic_id,
        partition=partition.partition,
        error=None if error == 0 else error_for_code(error),
        acknowledge_error=None if acknowledge_error == 0 else error_for_code(acknowledge_error),
        current_leader=leader,
        records=batch(*numbers) if numbers else DecodedRecords(),
        acquired=(AcquiredRange(numbers[0], numbers[-1], delivery_count),) if numbers else (),
    )


def fetched(
    *parts: ShareFetchPartition,
    error: int = 0,
    endpoints: Mapping[int, BrokerAddress] | None = None,
) -> ShareFetchResult:
    return ShareFetchResult(
        error=None if error == 0 else error_for_code(error),
        acquisition_lock_timeout_ms=LOCK_TIMEOUT_MS,
        partitions=parts,
        node_endpoints=dict(endpoints or {}),
    )


def acknowledged(
    errors: Mapping[TopicIdPartition, int], *, error: int = 0
) -> ShareAcknowledgeResult:
    return ShareAcknowledgeResult(
        error=None if error == 0 else error_for_code(error),
        partitions=tuple(
            ShareAcknowledgePartition(
                p.topic_id, p.partition, None if code == 0 else error_for_code(code), None
            )
            for p, code in errors.items()
        ),
        acquisition_lock_timeout_ms=LOCK_TIMEOUT_MS,
    )


@dataclass
class ScriptedCluster:
    """The fake cluster. ``leader_of`` is what metadata answers (change it to move leaders)."""

    leader_of: dict[TopicIdPartition, int]
    nodes: set[int] = field(default_factory=lambda: {1, 2})
    fetch_steps: dict[int, collections.deque[Step]] = field(
        default_factory=lambda: collections.defaultdict(collections.deque)
    )
    ack_steps: dict[int, collections.deque[Step]] = field(
        default_factory=lambda: collections.defaultdict(collections.deque)
    )
    fetches: list[tuple[int, ShareFetchPlan]] = field(default_factory=list)
    acknowledges: list[tuple[int, ShareAcknowledgePlan]] = field(default_factory=list)
    lookups: int = 0
    renew: bool = True

    def script_fetch(self, node: int, *steps: Step) -> None:
        self.fetch_steps[node].extend(steps)

    def script_ack(self, node: int, *steps: Step) -> None:
        self.ack_steps[node].extend(steps)

    async def share_fetch(self, node_id: int, plan: ShareFetchPlan) -> ShareFetchResult:
        self.fetches.append((node_id, plan))
        steps = self.fetch_steps[node_id]
        if not steps:  # nothing new; acknowledgements applied (the broker answers for each)
            await asyncio.sleep(LONG_POLL_S)
            return fetched(*(part(p) for p in plan.acknowledgements))
        step = steps.popleft()
        await asyncio.sleep(0)
        if isinstance(step, ConsumerError):
            raise step
        assert isinstance(step, ShareFetchResult)
        return step

    async def share_acknowledge(
        self, node_id: int, plan: ShareAcknowledgePlan
    ) -> ShareAcknowledgeResult:
        self.acknowledges.append((node_id, plan))
        steps = self.ack_steps[node_id]
        if not steps:  # everything applied
            return acknowledged({p: 0 for p in plan.acknowledgements})
        step = steps.popleft()
        if isinstance(step, ConsumerError):
            raise step
        assert isinstance(step, ShareAcknowledgeResult)
        return step

    async def leaders(self, topic_ids: Iterable[uuid.UUID]) -> Leaders:
        self.lookups += 1
        wanted = set(topic_ids)
        return Leaders(
            {TOPIC_ID: TOPIC} if TOPIC_ID in wanted else {},
            {p: n for p, n in self.leader_of.items() if p.topic_id in wanted},
        )

    def known_nodes(self) -> frozenset[int]:
        return frozenset(self.nodes)

    async def renew_supported(self) -> bool:
        return self.renew

    def fetches_to(self, node: int) -> list[ShareFetchPlan]:
        return [plan for n, plan in self.fetches if n == node]


@dataclass
class Rig:
    """A data plane on a scripted cluster, with what it delivered, reported and surfaced."""

    cluster: ScriptedCluster
    delivered: list[FetchedRecord] = field(default_factory=list)
    reports: list[AcknowledgementsCompleted] = field(default_factory=list)
    surfaced: list[ConsumerError] = field(default_factory=list)
    plane: ShareDataPlane = field(init=False)

    def __post_init__(self) -> None:
        self.plane = ShareDataPlane(
            self.cluster,
            deliver=self.delivered.extend,
            undelivered=lambda: 0,
            report=self.reports.append,
            surface=self.surfaced.append,
            retry_backoff_ms=5,
        )

    def outcomes(self) -> list[tuple[dict[tuple[str, int], frozenset[int]], str | None]]:
        """Each report as (offsets, error name or None)."""
        return [
            (
                dict(report.offsets),
                None
                if report.error is None
                else (
                    report.error.name
                    if isinstance(report.error, BrokerError)
                    else type(report.error).__name__
                ),
            )
            for report in self.reports
        ]


async def eventually(condition: Callable[[], bool], what: str, bound_s: float = 3.0) -> None:
    """Yield to the loop until ``condition()`` holds; fail naming ``what`` after ``bound_s``."""
    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {bound_s} s: {what}"
        await asyncio.sleep(0.002)
