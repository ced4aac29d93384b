"""Turn the member's network commands into requests, and responses back into member inputs.

Every method sends one request through the :class:`~consumer._runtime.cluster.ClusterClient` and
returns the input that answers the command; it never raises for a broker or transport error (those
become inputs the member knows how to handle: retry, rediscover, fence or fail).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from typing import TypeVar

from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._logging import routed_logger
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.start_offsets import StartOffsetLister
from consumer._wire import (
    ApiKey,
    ClusterMetadata,
    HeartbeatRequestBuilder,
    NegotiatedVersions,
    OffsetCommitFields,
    OffsetFetchFields,
    OffsetToCommit,
    build_offset_commit_request,
    build_offset_fetch_request,
    offsets_version,
    parse_heartbeat_response,
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
_Parsed = TypeVar("_Parsed")

#: What a heartbeat is answered with.
HeartbeatAnswer = HeartbeatSucceeded | HeartbeatFailed | HeartbeatTransportFailed
#: What a coordinator lookup is answered with.
CoordinatorAnswer = CoordinatorChanged | CoordinatorLost
#: What an offset commit or fetch is answered with.
OffsetsAnswer = CommitCompleted | CommittedOffsetsFetched
#: Every answer a request of this module feeds back to the member.
Answer = HeartbeatAnswer | CoordinatorAnswer | MetadataResolved | OffsetsAnswer | StartOffsetsListed


class GroupRequests:
    """The coordinator and metadata requests of one member."""

    def __init__(self, cluster: ClusterClient, group_id: str, request_timeout_ms: int) -> None:
        self._cluster = cluster
        self._group_id = group_id
        self._request_timeout_ms = request_timeout_ms
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._start_offsets = StartOffsetLister(cluster, request_timeout_ms)
        #: An idle member's equal heartbeats reuse one kio request.
        self._heartbeats = HeartbeatRequestBuilder()
        #: The answer of the lookup by name in flight (:meth:`resolve_names`; None for a failed
        #: one): a lookup by id meanwhile waits for it instead of sending a second request.
        self._names_in_flight: asyncio.Future[ClusterMetadata | None] | None = None

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
        """Resolve topic ids to names (ids the cluster does not know are left out).

        While a lookup by name (:meth:`resolve_names`) is in flight, its answer is awaited
        first and used when it names every id asked for: a join heartbeat's answer (the first
        assignment) arrives before it on the same connection, and a second Metadata request of
        the same topics would cost the broker and this process another parse of every partition.
        """
        in_flight = self._names_in_flight
        if in_flight is not None:
            # Shielded: cancelling this task must not cancel the answer resolve_names sets.
            snapshot = await asyncio.shield(in_flight)
            if snapshot is not None:
                names = snapshot.topic_names_by_id()
                if all(topic_id in names for topic_id in command.topic_ids):
                    return MetadataResolved(dict(names))
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
        A lookup by id (:meth:`metadata`) asked for meanwhile waits for this answer.
        """
        answered: asyncio.Future[ClusterMetadata | None] = (
            asyncio.get_running_loop().create_future()
        )
        self._names_in_flight = answered
        snapshot: ClusterMetadata | None = None
        try:
            snapshot = await self._cluster.metadata(list(topic_names))
            self._learn(snapshot)
        except ConsumerError:
            snapshot = None  # the assignment path asks by id, as before
        finally:  # also when cancelled: nobody may wait for it forever
            if self._names_in_flight is answered:
                self._names_in_flight = None
            answered.set_result(snapshot)
        if snapshot is None:
            return MetadataResolved({})
        return MetadataResolved(dict(snapshot.topic_names_by_id()))

    def _learn(self, snapshot: ClusterMetadata) -> None:
        """Keep topic ids and partition leaders from a metadata answer."""
        names = snapshot.topic_names_by_id()
        self._topic_ids.update({name: topic_id for topic_id, name in names.items()})
        self._start_offsets.learn(snapshot)

    async def list_start_offsets(self, command: ListStartOffsets) -> StartOffsetsListed:
        """ListOffsets for the round's uncommitted partitions (see :class:`StartOffsetLister`)."""
        return await self._start_offsets.resolve(command)

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
