"""The share data plane: one share session per partition leader, fetched by one task each.

Each fetch carries the pending acknowledgements of that node's partitions (piggybacking); a
node fetches again only once the application has taken what was delivered (or acknowledgements
are waiting), so a member does not hoard record locks. Commits go out as ShareAcknowledge; close
sends the final acknowledgements on the closing ShareAcknowledge (epoch -1), which releases every
record still acquired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping

from consumer._runtime.cluster import ClusterClient
from consumer._share_runtime.events import CommitResult, FetchedRecord
from consumer._wire import (
    ApiKey,
    build_share_acknowledge_request,
    build_share_fetch_request,
    parse_share_acknowledge_response,
    parse_share_fetch_response,
)
from consumer.errors import ConsumerError
from consumer.share.acknowledgements import (
    AcknowledgementBatch,
    Acknowledgements,
    AcknowledgeType,
    TopicIdPartition,
)
from consumer.share.acquired import filter_acquired
from consumer.share.fetch_parameters import ShareFetchParameters
from consumer.share.session import ShareSession

__all__ = ["ShareDataPlane"]

_log = logging.getLogger(__name__)
AckMap = dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]
#: How long an idle fetcher waits before looking again when nothing woke it.
_IDLE_WAIT_S = 0.1


class ShareDataPlane:
    """Sessions, fetch tasks and pending acknowledgements of one share consumer (loop-only)."""

    def __init__(
        self,
        cluster: ClusterClient,
        group_id: str,
        member_id: str,
        parameters: ShareFetchParameters,
        deliver: Callable[[tuple[FetchedRecord, ...]], None],
        undelivered: Callable[[], int],
        retry_backoff_ms: int,
    ) -> None:
        self._cluster = cluster
        self._group_id = group_id
        self._member_id = member_id
        self._parameters = parameters
        self._deliver = deliver
        self._undelivered = undelivered
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._acks = Acknowledgements()
        self._wanted: frozenset[TopicIdPartition] = frozenset()
        self._leaders: dict[TopicIdPartition, int] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._sessions: dict[int, ShareSession] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        self._stopping = False

    def nudge(self) -> None:
        """Something changed (acks queued, the application took records): fetchers look again."""
        self._changed.set()

    def acknowledge(self, acks: Iterable[tuple[TopicIdPartition, int, AcknowledgeType]]) -> None:
        """Queue acknowledgements from the application."""
        for partition, offset, kind in acks:
            self._acks.add(partition, offset, kind)
        self.nudge()

    def stop(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Stop fetching ``partitions`` (their pending acks still ride on the next request)."""
        self._wanted = self._wanted - frozenset(partitions)
        self.nudge()

    async def assign(self, assigned: Iterable[TopicIdPartition]) -> None:
        """Fetch exactly ``assigned``: resolve names and leaders, start a fetcher per leader."""
        wanted = frozenset(assigned)
        if wanted:
            metadata = await self._cluster.metadata(sorted({p.topic_id for p in wanted}, key=str))
            for topic in metadata.topics:
                if topic.topic_id is None or topic.name is None or topic.error is not None:
                    continue
                self._names[topic.topic_id] = topic.name
                for index, entry in topic.partitions.items():
                    self._leaders[TopicIdPartition(topic.topic_id, index)] = entry.leader_id
        missing = {p for p in wanted if p.topic_id not in self._names or p not in self._leaders}
        if missing:
            _log.warning("share partitions without a known name or leader (skipped): %s", missing)
        self._wanted = wanted - frozenset(missing)
        for partition in self._wanted:
            node = self._leaders[partition]
            if node >= 0 and node not in self._tasks:
                self._sessions[node] = ShareSession(node)
                self._locks[node] = asyncio.Lock()
                self._tasks[node] = asyncio.create_task(self._fetch_loop(node))
        self.nudge()

    def _partitions_of(
        self, node: int, partitions: Iterable[TopicIdPartition]
    ) -> set[TopicIdPartition]:
        return {p for p in partitions if self._leaders.get(p) == node}

    async def _fetch_loop(self, node: int) -> None:
        session = self._sessions[node]
        while not self._stopping:
            wanted = self._partitions_of(node, self._wanted)
            with_acks = self._partitions_of(node, self._acks.pending_partitions())
            if not with_acks and (not wanted or self._undelivered() > 0):
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), _IDLE_WAIT_S)
                continue
            acks: AckMap = self._acks.take(with_acks)
            if not session.accepts_acknowledgements and acks:
                _log.warning("share session with node %d was reset; acks dropped: %s", node, acks)
                acks = {}
            try:
                async with self._locks[node]:
                    await self._fetch_once(node, session, wanted, acks)
            except ConsumerError as exc:
                _log.warning("share fetch from node %d failed: %s", node, exc)
                if session.in_flight:
                    session.on_disconnect()
                await asyncio.sleep(self._retry_backoff_s)

    async def _fetch_once(
        self, node: int, session: ShareSession, wanted: set[TopicIdPartition], acks: AckMap
    ) -> None:
        connection = await self._cluster.connection_to(node)
        plan = session.fetch(wanted, acks)
        request = build_share_fetch_request(
            connection.api_version(ApiKey.SHARE_FETCH),
            group_id=self._group_id,
            member_id=self._member_id,
            share_session_epoch=plan.epoch,
            max_wait_ms=self._parameters.max_wait_ms,
            min_bytes=self._parameters.min_bytes,
            max_bytes=self._parameters.max_bytes,
            max_records=self._parameters.max_records,
            batch_size=self._parameters.batch_size,
            acquire_mode=self._parameters.acquire_mode,
            topics=plan.wire_topics(),
            forgotten=plan.wire_forgotten(),
            is_renew_ack=plan.is_renew_ack,
        )
        try:
            result = parse_share_fetch_response(await connection.request(request))
        except ConsumerError:
            session.on_disconnect()
            raise
        session.on_response(None if result.error is None else result.error.name)
        if result.error is not None:
            _log.warning("share fetch from node %d: %s", node, result.error)
            await asyncio.sleep(self._retry_backoff_s)
            return
        delivered: list[FetchedRecord] = []
        for part in result.partitions:
            partition = TopicIdPartition(part.topic_id, part.partition)
            if part.acknowledge_error is not None:
                _log.warning("acknowledgements of %s failed: %s", partition, part.acknowledge_error)
            if part.error is not None:
                _log.warning("share fetch of %s failed: %s", partition, part.error)
                continue
            acquired = filter_acquired(
                part.records.records, part.acquired, part.records.corrupt_batches
            )
            self._acks.add_all(partition, acquired.gaps, AcknowledgeType.GAP)
            self._acks.add_all(partition, acquired.unreadable, AcknowledgeType.REJECT)
            name = self._names.get(part.topic_id, str(part.topic_id))
            delivered.extend(
                FetchedRecord(name, partition, record, count)
                for record, count in acquired.delivered
            )
        if delivered:
            self._deliver(tuple(delivered))

    async def commit(self) -> CommitResult:
        """Send every pending acknowledgement by ShareAcknowledge, one request per leader."""
        outcome: CommitResult = {}
        taken = self._acks.take()
        by_node: dict[int, AckMap] = {}
        for partition, batches in taken.items():
            by_node.setdefault(self._leaders.get(partition, -1), {})[partition] = batches
        for node, acks in by_node.items():
            outcome.update(await self._acknowledge(node, acks, close=False))
        return outcome

    async def _acknowledge(self, node: int, acks: AckMap, *, close: bool) -> CommitResult:
        keys = {p: (self._names.get(p.topic_id, str(p.topic_id)), p.partition) for p in acks}
        session = self._sessions.get(node)
        if session is None or (not close and not session.accepts_acknowledgements):
            lost = ConsumerError(f"no open share session with node {node} for these records")
            return {key: lost for key in keys.values()}
        async with self._locks[node]:
            plan = session.close(acks) if close else session.acknowledge(acks)
            if plan is None:
                return {}
            try:
                connection = await self._cluster.connection_to(node)
                request = build_share_acknowledge_request(
                    connection.api_version(ApiKey.SHARE_ACKNOWLEDGE),
                    group_id=self._group_id,
                    member_id=self._member_id,
                    share_session_epoch=plan.epoch,
                    topics=plan.wire_topics(),
                    is_renew_ack=plan.is_renew_ack,
                )
                result = parse_share_acknowledge_response(await connection.request(request))
            except ConsumerError as exc:
                session.on_disconnect()
                failed = ConsumerError(f"acknowledgements to node {node} were not answered: {exc}")
                return {key: failed for key in keys.values()}
            session.on_response(None if result.error is None else result.error.name)
        errors: Mapping[TopicIdPartition, ConsumerError | None] = {
            TopicIdPartition(p.topic_id, p.partition): p.error for p in result.partitions
        }
        return {
            key: result.error if result.error is not None else errors.get(partition)
            for partition, key in keys.items()
        }

    async def close(self) -> CommitResult:
        """Stop fetching, then close every session with its final acknowledgements."""
        self._stopping = True
        self.nudge()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        outcome: CommitResult = {}
        taken = self._acks.take()
        for node in self._sessions:
            acks = {p: b for p, b in taken.items() if self._leaders.get(p) == node}
            outcome.update(await self._acknowledge(node, acks, close=True))
        return outcome
