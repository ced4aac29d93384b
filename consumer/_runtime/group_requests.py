"""Turn the member's network commands into requests, and responses back into member inputs.

Every method sends one request through the :class:`~consumer._runtime.cluster.ClusterClient` and
returns the input that answers the command; it never raises for a broker or transport error (those
become inputs the member knows how to handle: retry, rediscover, fence or fail).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._logging import routed_logger
from consumer._runtime.cluster import ClusterClient
from consumer._wire import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ApiKey,
    ClusterMetadata,
    HeartbeatRequestBuilder,
    NegotiatedVersions,
    OffsetCommitFields,
    OffsetFetchFields,
    OffsetToCommit,
    build_list_offsets_request,
    build_offset_commit_request,
    build_offset_fetch_request,
    offsets_version,
    parse_heartbeat_response,
    parse_list_offsets_response,
    parse_offset_commit_response,
    parse_offset_fetch_response,
)
from consumer._wire.offsets import TopicPartition as WireTopicPartition
from consumer.errors import BrokerError, ConsumerError, UnsupportedBrokerError
from consumer.member import (
    CommitCompleted,
    CommitOffsets,
    CommittedOffsetsFetched,
    CoordinatorChanged,
    CoordinatorLost,
    FetchCommittedOffsets,
    FetchMetadata,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    ListStartOffsets,
    MetadataResolved,
    ResetPolicy,
    SendHeartbeat,
    StartOffsetsListed,
    TopicPartition,
)
from consumer.member.partitions import flatten_assignment

_log = routed_logger("consumer.runtime")

#: Error code reported for transport failures of commits and fetches (retried by the member).
NETWORK_EXCEPTION = 13
#: Code used when the cluster cannot run the consumer protocol at all.
UNSUPPORTED_VERSION = 35
#: Pause before a ListOffsets is retried after a leader change or a transport failure (as
#: ``retry.backoff.ms``'s default; the retries stop at the request timeout).
_LIST_OFFSETS_RETRY_BACKOFF_MS = 100
#: Up to this many brokers, a partition whose leader is unknown is asked of each of them
#: instead of parsing the topic's whole Metadata (see GroupRequests.list_start_offsets).
_PROBE_MAX_BROKERS = 3
#: ListOffsets timestamps of the reset policies.
_POLICY_TIMESTAMPS = {
    ResetPolicy.EARLIEST: EARLIEST_TIMESTAMP,
    ResetPolicy.LATEST: LATEST_TIMESTAMP,
}

_Parsed = TypeVar("_Parsed")

#: What a heartbeat is answered with.
HeartbeatAnswer = HeartbeatSucceeded | HeartbeatFailed | HeartbeatTransportFailed
#: What a coordinator lookup is answered with.
CoordinatorAnswer = CoordinatorChanged | CoordinatorLost
#: What an offset commit or fetch is answered with.
OffsetsAnswer = CommitCompleted | CommittedOffsetsFetched
#: Every answer a request of this module feeds back to the member.
Answer = HeartbeatAnswer | CoordinatorAnswer | MetadataResolved | OffsetsAnswer | StartOffsetsListed
#: Partition -> the broker leading it, as the latest metadata said.
_Leaders = dict[TopicPartition, int]


class GroupRequests:
    """The coordinator and metadata requests of one member."""

    def __init__(self, cluster: ClusterClient, group_id: str, request_timeout_ms: int) -> None:
        self._cluster = cluster
        self._group_id = group_id
        self._request_timeout_ms = request_timeout_ms
        self._topic_ids: dict[str, uuid.UUID] = {}
        #: Partition leaders from every metadata answer (the join's, the assignment's).
        self._leaders: _Leaders = {}
        #: An idle member's equal heartbeats reuse one kio request.
        self._heartbeats = HeartbeatRequestBuilder()

    @property
    def topic_ids(self) -> Mapping[str, uuid.UUID]:
        """Topic name -> id, as learned from metadata responses."""
        return self._topic_ids

    async def heartbeat(
        self, command: SendHeartbeat, timeout_ms: int | None = None
    ) -> HeartbeatAnswer:
        """Send ConsumerGroupHeartbeat; answer with its outcome.

        ``timeout_ms`` bounds the wait for the answer (default: the request timeout).
        """

        try:
            response = await self._cluster.coordinator_request(
                self._group_id,
                self._heartbeat_builder(command),
                timeout_ms=timeout_ms or self._request_timeout_ms,
            )
        except ConsumerError as exc:
            return _heartbeat_answer(command, exc)
        return _heartbeat_answer(command, response)

    def heartbeat_soon(
        self,
        command: SendHeartbeat,
        timeout_ms: int,
        on_answer: Callable[[HeartbeatAnswer], None],
        on_bug: Callable[[Exception], None],
    ) -> bool:
        """:meth:`heartbeat` without a task: sent now over the coordinator's open connection,
        ``on_answer`` called with the same answer later (from the socket's read callback or
        the timeout's timer). False when it cannot go out that way (no known coordinator, no
        open session, a version problem): nothing was sent, use :meth:`heartbeat`. An exception
        while handling the answer is a bug: it goes to ``on_bug``, never into the socket's
        callback (where asyncio would only close the connection).
        """

        def answered(outcome: ResponsePayload | ConsumerError) -> None:
            try:
                on_answer(_heartbeat_answer(command, outcome))
            except Exception as exc:  # noqa: BLE001 - handed to the runtime, which stops
                on_bug(exc)

        try:
            return self._cluster.coordinator_request_soon(
                self._group_id, self._heartbeat_builder(command), answered, timeout_ms=timeout_ms
            )
        except ConsumerError:  # e.g. a regex at v0: heartbeat() reports it
            return False

    def _heartbeat_builder(
        self, command: SendHeartbeat
    ) -> Callable[[NegotiatedVersions], RequestPayload]:
        def build(versions: NegotiatedVersions) -> RequestPayload:
            return self._heartbeats.build(
                command.request, versions.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT)
            )

        return build

    async def find_coordinator(self) -> CoordinatorAnswer:
        """Look the coordinator up again."""
        try:
            location = await self._cluster.find_coordinator(self._group_id, refresh=True)
        except UnsupportedBrokerError as exc:
            return CoordinatorLost(str(exc), UNSUPPORTED_VERSION)
        except BrokerError as exc:
            # Refusals (authorization, authentication) carry their code: the member fails on
            # them; retriable ones are looked up again after a backoff.
            return CoordinatorLost(str(exc), None if exc.retriable else exc.code)
        except ConsumerError as exc:
            return CoordinatorLost(str(exc))
        try:  # connect now: the next heartbeat (a join right after subscribe()) goes out at once
            await self._cluster.coordinator_connection(self._group_id)
        except ConsumerError as exc:
            _log.debug("connecting to the coordinator after its lookup failed: %s", exc)
        return CoordinatorChanged(location.node_id)

    async def metadata(self, command: FetchMetadata) -> MetadataResolved:
        """Resolve topic ids to names (ids the cluster does not know are left out)."""
        try:
            snapshot = await self._cluster.metadata(list(command.topic_ids))
        except ConsumerError:
            return MetadataResolved({})
        self._learn(snapshot)
        return MetadataResolved(dict(snapshot.topic_names_by_id()))

    async def resolve_names(self, topic_names: tuple[str, ...]) -> MetadataResolved:
        """Learn the ids of subscribed topics before an assignment names them by id.

        Sent next to a join heartbeat: the answer that brings the first partitions then needs no
        Metadata round trip (one of 900 partitions costs tens of ms to parse on a busy machine)
        before the committed offsets are fetched. librdkafka has them from its own metadata.
        """
        try:
            snapshot = await self._cluster.metadata(list(topic_names))
        except ConsumerError:
            return MetadataResolved({})  # the assignment path asks by id, as before
        self._learn(snapshot)
        return MetadataResolved(dict(snapshot.topic_names_by_id()))

    def _learn(self, snapshot: ClusterMetadata) -> None:
        """Keep topic ids and partition leaders from a metadata answer."""
        names = snapshot.topic_names_by_id()
        self._topic_ids.update({name: topic_id for topic_id, name in names.items()})
        for topic in snapshot.topics:
            if topic.name is None or topic.error is not None:
                continue
            for index, entry in topic.partitions.items():
                key = TopicPartition(topic.name, index)
                if entry.error is None and entry.leader_id >= 0:
                    self._leaders[key] = entry.leader_id
                else:
                    self._leaders.pop(key, None)

    async def list_start_offsets(self, command: ListStartOffsets) -> StartOffsetsListed:
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
                    self._leaders.update(dict.fromkeys(listed, node))  # it leads them
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
        unknown = any(tp not in self._leaders for tp in wanted)
        if refresh or (unknown and not self._probe_nodes()):
            try:
                self._learn(await self._cluster.metadata(sorted({tp.topic for tp in wanted})))
            except ConsumerError as exc:
                _log.debug("metadata for start offsets failed: %s", exc)
        return {tp: self._leaders[tp] for tp in wanted if tp in self._leaders}

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

    async def commit(self, command: CommitOffsets) -> CommitCompleted:
        """OffsetCommit v9/v10 with the member id and epoch."""
        offsets = [
            OffsetToCommit(
                topic=tp.topic,
                partition=tp.partition,
                offset=offset,
                topic_id=self._topic_ids.get(tp.topic),
            )
            for tp, offset in command.offsets.items()
        ]
        fields = OffsetCommitFields(
            group_id=command.group_id,
            member_id=command.member_id or "",
            member_epoch=command.member_epoch,
            offsets=offsets,
        )
        results = await self._offsets_call(
            ApiKey.OFFSET_COMMIT,
            [o.topic_id for o in offsets],
            lambda version: build_offset_commit_request(fields, version),
            lambda response: parse_offset_commit_response(
                response, topic_names_by_id=self._names()
            ),
        )
        if isinstance(results, int):
            return CommitCompleted(command.request_id, error_code=results)
        errors = {
            TopicPartition(result.topic or "", result.partition): (
                0 if result.error is None else result.error.code
            )
            for result in results
        }
        return CommitCompleted(command.request_id, partition_errors=errors)

    async def fetch_committed(self, command: FetchCommittedOffsets) -> CommittedOffsetsFetched:
        """OffsetFetch v9/v10 (RequireStable) with the member id and epoch."""
        partitions = [
            WireTopicPartition(tp.topic, tp.partition, self._topic_ids.get(tp.topic))
            for tp in command.partitions
        ]
        fields = OffsetFetchFields(
            group_id=command.group_id,
            partitions=partitions,
            member_id=command.member_id,
            member_epoch=command.member_epoch,
        )
        result = await self._offsets_call(
            ApiKey.OFFSET_FETCH,
            [p.topic_id for p in partitions],
            lambda version: build_offset_fetch_request(fields, version),
            lambda response: parse_offset_fetch_response(response, topic_names_by_id=self._names()),
        )
        if isinstance(result, int):
            return CommittedOffsetsFetched(command.request_id, error_code=result)
        if result.error is not None:
            return CommittedOffsetsFetched(command.request_id, error_code=result.error.code)
        offsets: dict[TopicPartition, int | None] = {}
        errors: dict[TopicPartition, int] = {}
        for entry in result.offsets:
            tp = TopicPartition(entry.topic or "", entry.partition)
            if entry.error is not None:
                errors[tp] = entry.error.code
            else:
                offsets[tp] = entry.offset if entry.offset >= 0 else None
        return CommittedOffsetsFetched(command.request_id, offsets=offsets, partition_errors=errors)

    async def _offsets_call(
        self,
        api_key: ApiKey,
        topic_ids: list[uuid.UUID | None],
        build: Callable[[int], RequestPayload],
        parse: Callable[[ResponsePayload], _Parsed],
    ) -> _Parsed | int:
        """Send an OffsetCommit/OffsetFetch built at the version :func:`offsets_version` picks
        for the coordinator's range and ``topic_ids`` (v10 only when every id is known).

        Returns the parsed response, or the error code of a failure: the broker's, or
        NETWORK_EXCEPTION for a transport failure (both retried by the member where it can).
        """

        def build_for(versions: NegotiatedVersions) -> RequestPayload:
            return build(offsets_version(versions.version_for(api_key), topic_ids))

        try:
            response = await self._cluster.coordinator_request(
                self._group_id, build_for, timeout_ms=self._request_timeout_ms
            )
            return parse(response)
        except BrokerError as exc:
            return exc.code
        except ConsumerError:
            return NETWORK_EXCEPTION

    def _names(self) -> dict[uuid.UUID, str]:
        return {topic_id: name for name, topic_id in self._topic_ids.items()}


def _heartbeat_answer(
    command: SendHeartbeat, outcome: ResponsePayload | ConsumerError
) -> HeartbeatAnswer:
    """The member's input for a heartbeat's response or transport/broker error."""
    try:
        if isinstance(outcome, ConsumerError):
            raise outcome
        result = parse_heartbeat_response(outcome)
    except UnsupportedBrokerError as exc:
        return HeartbeatFailed(command.request_id, UNSUPPORTED_VERSION, str(exc))
    except BrokerError as exc:
        if exc.retriable:
            return HeartbeatTransportFailed(command.request_id, str(exc))
        return HeartbeatFailed(command.request_id, exc.code, exc.message)
    except ConsumerError as exc:
        return HeartbeatTransportFailed(command.request_id, str(exc))
    if result.error is not None:
        return HeartbeatFailed(command.request_id, result.error.code, result.error.broker_message)
    assignment = None if result.assignment is None else flatten_assignment(result.assignment)
    return HeartbeatSucceeded(
        request_id=command.request_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
        member_id=result.member_id,
    )
