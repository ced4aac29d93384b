"""Where a new partition with nothing committed starts: ListOffsets to its leader.

The assignment round's LISTING_OFFSETS phase (``ListStartOffsets``) turns the reset policy
(earliest / latest) into absolute offsets on the background loop, so that the application thread
hands librdkafka absolute start offsets only (see ``consumer._client.dataplane``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterable, Mapping

from consumer._logging import routed_logger
from consumer._runtime.cluster import ClusterClient
from consumer._wire import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ApiKey,
    ClusterMetadata,
    PartitionMetadata,
    build_list_offsets_request,
    parse_list_offsets_response,
)
from consumer.errors import ConsumerError, UnsupportedBrokerError
from consumer.member import ListStartOffsets, ResetPolicy, StartOffsetsListed, TopicPartition

_log = routed_logger("consumer.runtime")

#: Pause before a ListOffsets is retried after a leader change or a transport failure (as
#: ``retry.backoff.ms``'s default; the retries stop at the request timeout).
_LIST_OFFSETS_RETRY_BACKOFF_MS = 100
#: Up to this many brokers, a partition whose leader is unknown is asked of each of them
#: instead of parsing the topic's whole Metadata (see StartOffsetLister.resolve).
_PROBE_MAX_BROKERS = 3
#: ListOffsets timestamps of the reset policies.
_POLICY_TIMESTAMPS = {
    ResetPolicy.EARLIEST: EARLIEST_TIMESTAMP,
    ResetPolicy.LATEST: LATEST_TIMESTAMP,
}

#: Partition -> the broker leading it, as the latest metadata said.
_Leaders = dict[TopicPartition, int]


class StartOffsetLister:
    """ListOffsets of one member, with the partition leaders its metadata answers taught."""

    def __init__(self, cluster: ClusterClient, request_timeout_ms: int) -> None:
        self._cluster = cluster
        self._request_timeout_ms = request_timeout_ms
        #: Per topic, its partitions as the latest metadata answer described them (the join's,
        #: the assignment's): kept by reference, as the answer's snapshot is immutable.
        self._topics: dict[str, Mapping[int, PartitionMetadata]] = {}
        #: Leaders learned since (a probed broker answered for them): they win over ``_topics``.
        self._probed: _Leaders = {}

    def learn(self, snapshot: ClusterMetadata) -> None:
        """Keep the partition leaders of a metadata answer.

        O(topics + probed partitions), not O(partitions): with 50 members in one process, each
        building a key per partition of a 900-partition topic cost them 1.7 ms of CPU each.
        """
        for topic in snapshot.topics:
            if topic.name is None or topic.error is not None:
                continue
            self._topics[topic.name] = topic.partitions
            for tp in [tp for tp in self._probed if tp.topic == topic.name]:
                if tp.partition in topic.partitions:  # the newer answer tells
                    del self._probed[tp]

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The broker leading ``tp`` as last learned (None: unknown, or no leader then)."""
        probed = self._probed.get(tp)
        if probed is not None:
            return probed
        entry = self._topics.get(tp.topic, {}).get(tp.partition)
        if entry is None or entry.error is not None or entry.leader_id < 0:
            return None
        return entry.leader_id

    async def resolve(self, command: ListStartOffsets) -> StartOffsetsListed:
        """ListOffsets to each partition's leader (one request per broker, concurrently).

        Leaders come from the metadata already learned. A partition whose leader is unknown (a
        partition just added to the topic) is asked of every broker of a small cluster (at most
        ``_PROBE_MAX_BROKERS``): only its leader answers with an offset, the others with
        NOT_LEADER_OR_FOLLOWER, and no Metadata of the whole topic is parsed (with 50 members in
        one process that parse cost about 44 ms per member and growth step); a larger cluster
        asks Metadata first. A partition whose leader moved (NOT_LEADER_OR_FOLLOWER,
        UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, any retriable error), that no broker
        answered, or whose request failed in transit is asked again after fresh metadata, until
        the request timeout; a partition still without an offset then (or with a non-retriable
        error) is left out of the answer, and the data plane falls back to the logical offset.
        """
        deadline_s = time.monotonic() + self._request_timeout_ms / 1000
        ask = functools.partial(
            self._list_offsets,
            timestamp=_POLICY_TIMESTAMPS[command.policy],
            read_committed=command.read_committed,
        )
        found: dict[TopicPartition, int] = {}
        pending = set(command.partitions)
        refresh = False
        while pending:
            leaders = await self._leaders_of(pending, refresh)
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                if tp in leaders:
                    by_leader.setdefault(leaders[tp], []).append(tp)
            unknown = sorted(pending - leaders.keys())
            probed = self._probe_nodes() if unknown and not refresh else []
            answers = await asyncio.gather(
                *(ask(node, parts) for node, parts in by_leader.items()),
                *(ask(node, unknown) for node in probed),
            )
            retry = set(unknown)
            for (listed, again), node in zip(answers, [*by_leader, *probed], strict=True):
                found.update(listed)
                if node in probed:
                    self._probed.update(dict.fromkeys(listed, node))  # it leads them
                    retry -= listed.keys()
                else:
                    retry |= again
            pending = retry
            if not pending or time.monotonic() + _LIST_OFFSETS_RETRY_BACKOFF_MS / 1000 > deadline_s:
                break
            await asyncio.sleep(_LIST_OFFSETS_RETRY_BACKOFF_MS / 1000)
            refresh = True
        if pending:
            _log.debug("start offsets not found for %s: logical offsets apply", sorted(pending))
        return StartOffsetsListed(command.request_id, found)

    def _probe_nodes(self) -> list[int]:
        """The brokers to ask for partitions whose leader is unknown ([]: too many, or none)."""
        brokers = sorted(self._cluster.brokers)
        return brokers if len(brokers) <= _PROBE_MAX_BROKERS else []

    async def _leaders_of(self, partitions: Iterable[TopicPartition], refresh: bool) -> _Leaders:
        """The known leaders of ``partitions``; metadata first on ``refresh``, or when one is
        unknown and the cluster is too large to ask every broker."""
        wanted = set(partitions)
        unknown = any(self.leader_of(tp) is None for tp in wanted)
        if refresh or (unknown and not self._probe_nodes()):
            try:
                self.learn(await self._cluster.metadata(sorted({tp.topic for tp in wanted})))
            except ConsumerError as exc:
                _log.debug("metadata for start offsets failed: %s", exc)
        leaders = {tp: self.leader_of(tp) for tp in wanted}
        return {tp: leader for tp, leader in leaders.items() if leader is not None}

    async def _list_offsets(
        self,
        node_id: int,
        partitions: list[TopicPartition],
        *,
        timestamp: int,
        read_committed: bool,
    ) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
        """One ListOffsets to broker ``node_id``: the offsets found, and the partitions to ask
        again (retriable errors, transport failures). Non-retriable errors drop a partition."""
        try:
            connection = await self._cluster.connection_to(node_id)
            version = connection.versions.version_for(ApiKey.LIST_OFFSETS)
            request = build_list_offsets_request(
                version,
                [(tp.topic, tp.partition) for tp in partitions],
                timestamp=timestamp,
                read_committed=read_committed,
                timeout_ms=self._request_timeout_ms,
            )
            response = await connection.request(request, timeout_ms=self._request_timeout_ms)
            results = parse_list_offsets_response(response)
        except UnsupportedBrokerError as exc:
            _log.debug("ListOffsets unsupported by broker %d: %s", node_id, exc)
            return {}, set()
        except ConsumerError as exc:
            _log.debug("ListOffsets to broker %d failed: %s", node_id, exc)
            return {}, set(partitions)
        found: dict[TopicPartition, int] = {}
        again: set[TopicPartition] = set(partitions)
        for result in results:
            tp = TopicPartition(result.topic, result.partition)
            if tp not in again:
                continue
            if result.error is None and result.offset >= 0:
                found[tp] = result.offset
                again.discard(tp)
            elif result.error is not None and not result.error.retriable:
                again.discard(tp)
        return found, again
