"""The share data plane: one share session per partition leader, fetched by one task each.

Each fetch carries the pending acknowledgements of that node's partitions (piggybacking); a
node fetches one delivery ahead of the application (again while at most one delivery waits to be
taken, or when acknowledgements are waiting), so the round trip overlaps the application's work
and a member does not hoard record locks. Commits go out as ShareAcknowledge; close
sends the final acknowledgements on the closing ShareAcknowledge (epoch -1), which releases every
record still acquired.

Every acknowledgement ends in an outcome handed to ``report`` (the commit callback's input):
applied, refused by the broker (the partition's error), or failed locally. They fail locally
when their session is lost (a session error or a disconnect: the request's own acknowledgements
and every queued one of that node fail, and a record acquired in the lost session cannot be
acknowledged any more; the broker returns it when its lock expires) and when the partition's
leader moves (acknowledgements cannot follow a partition to another session). Partition errors
are decided by :func:`consumer.share.partition_errors.action_for_partition_error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping

from consumer._share_runtime.events import (
    AcknowledgementsCompleted,
    CommitResult,
    FetchedRecord,
    RecordSource,
)
from consumer._share_runtime.outcomes import (
    AckResult,
    ack_runs,
    answered,
    batches_of,
    group_outcomes,
    leader_moved,
    no_session,
)
from consumer._share_runtime.transport import ShareTransport
from consumer._wire import BrokerAddress, LeaderHint
from consumer.errors import BrokerError, ConsumerError
from consumer.share.acknowledgements import (
    AcknowledgementBatch,
    Acknowledgements,
    AcknowledgeType,
    TopicIdPartition,
)
from consumer.share.acquired import filter_acquired
from consumer.share.partition_errors import (
    LeaderChange,
    PartitionAction,
    action_for_partition_error,
    leader_after_move,
)
from consumer.share.session import SessionOutcome, ShareSession

__all__ = ["ShareDataPlane"]

_log = logging.getLogger(__name__)
_new_tuple = tuple.__new__
AckMap = dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]
#: How long an idle fetcher waits before looking again when nothing woke it.
_IDLE_WAIT_S = 0.1
#: Deliveries the application has not taken yet, beyond which a node does not fetch again: one
#: batch ahead, so the next fetch's round trip overlaps the application's work, while a member
#: holds the locks of at most this many untaken deliveries plus the one in flight.
_PREFETCH_DELIVERIES = 1


class ShareDataPlane:
    """Sessions, fetch tasks and pending acknowledgements of one share consumer (loop-only).

    Args:
        transport: sends the requests (the real cluster, or a scripted fake in tests).
        deliver: hands acquired records to the application.
        undelivered: how many deliveries the application has not taken yet.
        report: hands acknowledgement outcomes to the application.
        surface: hands an error for the application to raise (authorization).
        retry_backoff_ms: pause after a failed request or a partition error.
        clock: monotonic seconds (lock deadlines).
    """

    def __init__(
        self,
        transport: ShareTransport,
        *,
        deliver: Callable[[tuple[FetchedRecord, ...]], None],
        undelivered: Callable[[], int],
        report: Callable[[AcknowledgementsCompleted], None],
        surface: Callable[[ConsumerError], None],
        retry_backoff_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._transport = transport
        self._deliver = deliver
        self._undelivered = undelivered
        self._report = report
        self._surface = surface
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._clock = clock
        self._acks = Acknowledgements()
        self._wanted: frozenset[TopicIdPartition] = frozenset()
        self._leaders: dict[TopicIdPartition, int] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._sessions: dict[int, ShareSession] = {}
        self._generations: dict[int, int] = {}
        self._reset_errors: dict[int, ConsumerError] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._stale_leaders: set[TopicIdPartition] = set()
        self._refresh: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._stopping = False
        self.acquisition_lock_timeout_ms: int | None = None
        """The latest ``AcquisitionLockTimeoutMs`` a broker sent (None before any)."""

    # --- what the loop calls ----------------------------------------------------------------

    @property
    def leaders(self) -> Mapping[TopicIdPartition, int]:
        """The leader each partition is fetched from now."""
        return dict(self._leaders)

    def session(self, node_id: int) -> ShareSession | None:
        """The share session with ``node_id``, if one was started."""
        return self._sessions.get(node_id)

    def nudge(self) -> None:
        """Something changed (acks queued, the application took records): fetchers look again."""
        self._changed.set()

    def acknowledge(
        self, acks: Iterable[tuple[TopicIdPartition, int, AcknowledgeType, RecordSource]]
    ) -> None:
        """Queue acknowledgements from the application; those whose record's session is gone
        (reset, or the partition moved to another leader) fail at once. Consecutive offsets
        with the same partition, type and session are queued as one range."""
        failed: dict[tuple[TopicIdPartition, str], tuple[ConsumerError, dict[int, AcknowledgeType]]]
        failed = {}
        for partition, first, last, kind, source in ack_runs(acks):
            error = self._stale_source(partition, source)
            if error is None:
                self._acks.add_range(partition, first, last, kind)
            else:
                offsets = failed.setdefault((partition, str(error)), (error, {}))[1]
                offsets.update(dict.fromkeys(range(first, last + 1), kind))
        self._complete(
            (partition, batches_of(offsets), error)
            for (partition, _), (error, offsets) in failed.items()
        )
        self.nudge()

    def stop(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Stop fetching ``partitions`` (their pending acks still ride on the next request)."""
        self._wanted = self._wanted - frozenset(partitions)
        self.nudge()

    async def assign(self, assigned: Iterable[TopicIdPartition]) -> None:
        """Fetch exactly ``assigned``: resolve names and leaders, start a fetcher per leader;
        partitions whose name or leader is unknown stay pending and are looked up again."""
        wanted = frozenset(assigned)
        self._wanted = wanted
        unknown = {p for p in wanted if p.topic_id not in self._names or p not in self._leaders}
        if unknown:
            try:
                await self._learn_leaders(unknown)
            except ConsumerError as exc:
                _log.warning("share assignment: metadata lookup failed: %s", exc)
        missing = {p for p in wanted if p.topic_id not in self._names or p not in self._leaders}
        for partition in missing:
            self._need_leader(partition)
        for partition in wanted - missing:
            self._ensure_fetcher(self._leaders[partition])
        self.nudge()

    def take_for_commit(self) -> dict[int, AckMap]:
        """Take every pending acknowledgement, by leader, for :meth:`commit` (taken at once, so
        no fetch carries them off first)."""
        return self._take_by_leader()

    async def commit(self, taken: dict[int, AckMap] | None = None) -> CommitResult:
        """Send ``taken`` (default: every pending acknowledgement) by ShareAcknowledge, one
        request per leader."""
        outcome: CommitResult = {}
        for node, acks in (self._take_by_leader() if taken is None else taken).items():
            outcome.update(await self._acknowledge(node, acks, close=False))
        return outcome

    async def close(self) -> CommitResult:
        """Stop fetching, then close every session with its final acknowledgements."""
        self._stopping = True
        self.nudge()
        if self._refresh is not None:
            self._refresh.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        by_node = self._take_by_leader()
        outcome: CommitResult = {}
        for node in set(self._sessions) | set(by_node):
            outcome.update(await self._acknowledge(node, by_node.get(node, {}), close=True))
        return outcome

    def _take_by_leader(self) -> dict[int, AckMap]:
        by_node: dict[int, AckMap] = {}
        for partition, batches in self._acks.take().items():
            by_node.setdefault(self._leaders.get(partition, -1), {})[partition] = batches
        return by_node

    # --- fetching ---------------------------------------------------------------------------

    def _ensure_fetcher(self, node: int) -> None:
        if node < 0 or node in self._tasks or self._stopping:
            return
        self._sessions[node] = ShareSession(node)
        self._generations.setdefault(node, 0)
        self._locks[node] = asyncio.Lock()
        self._tasks[node] = asyncio.create_task(self._fetch_loop(node))

    def _partitions_of(
        self, node: int, partitions: Iterable[TopicIdPartition]
    ) -> set[TopicIdPartition]:
        return {p for p in partitions if self._leaders.get(p) == node}

    async def _fetch_loop(self, node: int) -> None:
        session = self._sessions[node]
        while not self._stopping:
            wanted = self._partitions_of(node, self._wanted)
            with_acks = self._partitions_of(node, self._acks.pending_partitions())
            if with_acks and not session.accepts_acknowledgements:
                # Never on an epoch-0 fetch (INVALID_REQUEST): they belong to a lost session.
                self._fail(self._acks.take(with_acks), self._reset_error(node))
                with_acks = set()
            if not with_acks and (not wanted or self._undelivered() > _PREFETCH_DELIVERIES):
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), _IDLE_WAIT_S)
                continue
            if self._acks.has_renew(with_acks):
                # RENEW goes by ShareAcknowledge (v2, IsRenewAck), which answers the renewed
                # lock duration; a fetch carrying it would acquire nothing anyway.
                await self._acknowledge(node, self._acks.take(with_acks), close=False)
                continue
            acks: AckMap = self._acks.take(with_acks)
            async with self._locks[node]:
                healthy = await self._fetch_once(node, session, wanted, acks)
            if not healthy:
                await asyncio.sleep(self._retry_backoff_s)

    async def _fetch_once(
        self, node: int, session: ShareSession, wanted: set[TopicIdPartition], acks: AckMap
    ) -> bool:
        """One ShareFetch; False when it (or a partition) failed and the loop should back off."""
        plan = session.fetch(wanted, acks)
        sent_at = self._clock()
        try:
            result = await self._transport.share_fetch(node, plan)
        except ConsumerError as exc:
            _log.warning("share fetch from node %d failed: %s", node, exc)
            session.on_disconnect()
            self._session_lost(node, exc, plan.acknowledgements)
            return False
        error = result.error
        if session.on_response(None if error is None else error.name) is SessionOutcome.RESET:
            assert error is not None
            _log.warning("share session with node %d was reset: %s", node, error)
            self._session_lost(node, error, plan.acknowledgements)
            return False
        if result.acquisition_lock_timeout_ms > 0:
            self.acquisition_lock_timeout_ms = result.acquisition_lock_timeout_ms
        deadline = self._lock_deadline(sent_at)
        parts = {TopicIdPartition(p.topic_id, p.partition): p for p in result.partitions}
        answers = {partition: part.acknowledge_error for partition, part in parts.items()}
        self._complete(answered(plan.acknowledgements, error, answers, node), deadline)
        if error is not None:
            _log.warning("share fetch from node %d: %s", node, error)
            return False
        healthy = True
        delivered: list[FetchedRecord] = []
        source = RecordSource(node, self._generations[node])
        for partition, part in parts.items():
            if part.error is not None:
                healthy = False
                self._on_partition_error(
                    node, partition, part.error, part.current_leader, result.node_endpoints
                )
                continue
            acquired = filter_acquired(
                part.records.records, part.acquired, part.records.corrupt_batches
            )
            self._acks.add_all(partition, acquired.gaps, AcknowledgeType.GAP)
            self._acks.add_all(partition, acquired.unreadable, AcknowledgeType.REJECT)
            name = self._names.get(part.topic_id, str(part.topic_id))
            # tuple.__new__ skips the named tuple's Python-level __new__ (once per record).
            delivered.extend(
                [
                    _new_tuple(FetchedRecord, (name, partition, record, count, source, deadline))
                    for record, count in acquired.delivered
                ]
            )
        if delivered:
            self._deliver(tuple(delivered))
        return healthy

    def _lock_deadline(self, sent_at: float) -> float | None:
        timeout_ms = self.acquisition_lock_timeout_ms
        return None if timeout_ms is None else sent_at + timeout_ms / 1000

    # --- acknowledging ----------------------------------------------------------------------

    async def _acknowledge(self, node: int, acks: AckMap, *, close: bool) -> CommitResult:
        keys = {p: (self._names.get(p.topic_id, str(p.topic_id)), p.partition) for p in acks}
        session = self._sessions.get(node)
        if session is None:
            lost = self._reset_error(node)
            self._fail(acks, lost)
            return {key: lost for key in keys.values()}
        async with self._locks[node]:
            plan = None
            if not session.closed and (close or session.accepts_acknowledgements):
                plan = session.close(acks) if close else session.acknowledge(acks)
            if plan is None:  # no session open on the broker (epoch 0, or closed)
                lost = self._reset_error(node)
                self._fail(acks, lost)
                return {key: lost for key in keys.values()}
            sent_at = self._clock()
            try:
                result = await self._transport.share_acknowledge(node, plan)
            except ConsumerError as exc:
                session.on_disconnect()
                failed = ConsumerError(f"acknowledgements to node {node} were not answered: {exc}")
                if close:
                    self._fail(acks, failed)
                else:
                    self._session_lost(node, failed, acks)
                return {key: failed for key in keys.values()}
            error = result.error
            outcome = session.on_response(None if error is None else error.name)
        if outcome is SessionOutcome.RESET:
            assert error is not None
            self._session_lost(node, error, acks)
            return {key: error for key in keys.values()}
        if result.acquisition_lock_timeout_ms:
            self.acquisition_lock_timeout_ms = result.acquisition_lock_timeout_ms
        errors: dict[TopicIdPartition, ConsumerError | None] = {}
        for part in result.partitions:
            partition = TopicIdPartition(part.topic_id, part.partition)
            errors[partition] = part.error
            if part.error is not None and not close:
                self._on_partition_error(
                    node, partition, part.error, part.current_leader, result.node_endpoints
                )
        results = answered(acks, error, errors, node)
        self._complete(results, self._lock_deadline(sent_at))
        return {keys[partition]: outcome for partition, _, outcome in results}

    def _complete(self, results: Iterable[AckResult], lock_deadline_s: float | None = None) -> None:
        for completed in group_outcomes(results, self._names, lock_deadline_s):
            self._report(completed)

    def _fail(
        self,
        acks: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]],
        error: ConsumerError,
    ) -> None:
        self._complete((partition, batches, error) for partition, batches in acks.items())

    # --- losing sessions and leaders --------------------------------------------------------

    def _stale_source(
        self, partition: TopicIdPartition, source: RecordSource
    ) -> ConsumerError | None:
        """Why an acknowledgement of a record acquired in ``source`` cannot be sent (None: it
        can)."""
        leader = self._leaders.get(partition, -1)
        if leader != source.node_id:
            return leader_moved(self._describe(partition), source.node_id, leader)
        if self._generations.get(source.node_id, 0) != source.generation:
            return self._reset_error(source.node_id)
        return None

    def _reset_error(self, node: int) -> ConsumerError:
        return self._reset_errors.get(node) or no_session(node)

    def _session_lost(self, node: int, error: ConsumerError, in_flight: AckMap) -> None:
        """The session with ``node`` is gone (reset or disconnect): its acknowledgements in
        flight and queued fail, and records it acquired can no longer be acknowledged."""
        self._generations[node] = self._generations.get(node, 0) + 1
        self._reset_errors[node] = error
        queued = self._acks.take(self._partitions_of(node, self._acks.pending_partitions()))
        self._fail(in_flight, error)
        self._fail(queued, error)
        if not isinstance(error, BrokerError):  # a disconnect: the leaders may have moved
            for partition in self._partitions_of(node, self._wanted):
                self._need_leader(partition, keep_leader=True)

    def _on_partition_error(
        self,
        node: int,
        partition: TopicIdPartition,
        error: BrokerError,
        hint: LeaderHint | None,
        endpoints: Mapping[int, BrokerAddress],
    ) -> None:
        action = action_for_partition_error(error.name, retriable=error.retriable)
        _log.warning("share partition %s on node %d: %s (%s)", partition, node, error, action.value)
        if action is PartitionAction.MOVE_TO_LEADER:
            self._fail(self._acks.take([partition]), error)
            change = (
                None if hint is None else LeaderChange(partition, hint.leader_id, hint.leader_epoch)
            )
            known = self._transport.known_nodes() | endpoints.keys()
            leader = leader_after_move(node, change, known)
            if leader is None:
                self._need_leader(partition)
            else:
                _log.info("share partition %s moved to node %d", partition, leader)
                self._leaders[partition] = leader
                self._ensure_fetcher(leader)
        elif action is PartitionAction.REFRESH_METADATA:
            self._need_leader(partition, keep_leader=True)
        elif action is PartitionAction.SURFACE:
            self._surface(error)

    def _need_leader(self, partition: TopicIdPartition, *, keep_leader: bool = False) -> None:
        """Look ``partition``'s leader up again (in the background, with backoff); without
        ``keep_leader`` it is not fetched until found."""
        if not keep_leader:
            self._leaders.pop(partition, None)
        self._stale_leaders.add(partition)
        if (self._refresh is None or self._refresh.done()) and not self._stopping:
            self._refresh = asyncio.create_task(self._refresh_leaders())

    async def _refresh_leaders(self) -> None:
        while self._stale_leaders and not self._stopping:
            try:
                await self._learn_leaders(set(self._stale_leaders))
            except ConsumerError as exc:
                _log.warning("share metadata refresh failed: %s", exc)
            if self._stale_leaders:
                await asyncio.sleep(self._retry_backoff_s)

    async def _learn_leaders(self, partitions: set[TopicIdPartition]) -> None:
        found = await self._transport.leaders({p.topic_id for p in partitions})
        self._names.update(found.names)
        for partition in partitions:
            leader = found.leaders.get(partition, -1)
            if leader < 0 or partition.topic_id not in self._names:
                continue
            old = self._leaders.get(partition)
            if old is not None and old != leader:
                moved = leader_moved(self._describe(partition), old, leader)
                self._fail(self._acks.take([partition]), moved)
            self._leaders[partition] = leader
            self._stale_leaders.discard(partition)
            if partition in self._wanted:
                self._ensure_fetcher(leader)
        self.nudge()

    def _describe(self, partition: TopicIdPartition) -> str:
        return f"{self._names.get(partition.topic_id, partition.topic_id)}/{partition.partition}"
