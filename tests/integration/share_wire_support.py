"""Raw share-group traffic for the share data-plane tests: a ShareGroupHeartbeat join (encoded
with kio directly, so these tests do not depend on the share member core) and a small driver
that runs a :class:`~consumer.share.session.ShareSession` against one leader."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka.admin import (
    AdminClient,
)
from kio.schema.share_fetch.v1 import ShareFetchResponse as ShareFetchResponseV1
from kio.schema.share_fetch.v2 import ShareFetchResponse as ShareFetchResponseV2
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from consumer._runtime.cluster import ClusterClient
from consumer._runtime.connection import BrokerConnection
from consumer._wire import (
    ApiKey,
    Compression,
    Record,
    ShareAcknowledgeResult,
    ShareFetchResult,
    build_share_acknowledge_request,
    build_share_fetch_request,
    parse_share_acknowledge_response,
    parse_share_fetch_response,
)
from consumer.errors import CoordinatorError, error_or_none
from consumer.share.acknowledgements import AcknowledgementBatch, TopicIdPartition
from consumer.share.acquired import filter_acquired
from consumer.share.fetch_parameters import ShareFetchParameters
from consumer.share.session import SessionOutcome, ShareSession
from consumer.share_consumer import alter_share_group_configs

JOIN_BOUND_S = 30.0
RETRY_BACKOFF_S = 0.1


def set_share_group_configs(admin: AdminClient, group_id: str, **configs: str) -> None:
    """Set group configs (``share_auto_offset_reset="earliest"`` -> ``share.auto.offset.reset``)
    before the group first reads, and wait until the broker shows them."""
    alter_share_group_configs(
        admin, group_id, {name.replace("_", "."): value for name, value in configs.items()}
    )


@dataclass
class ShareMember:
    """A share-group member joined by raw heartbeats."""

    group_id: str
    member_id: str
    epoch: int
    interval_ms: int
    assignment: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)


async def share_heartbeat(
    cluster: ClusterClient,
    group_id: str,
    member_id: str,
    epoch: int,
    topics: tuple[str, ...] | None,
) -> ShareGroupHeartbeatResponse:
    request = ShareGroupHeartbeatRequest(
        group_id=GroupId(group_id),
        member_id=member_id,
        member_epoch=i32(epoch),
        subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics),
    )
    deadline = time.monotonic() + JOIN_BOUND_S
    while True:
        response = await cluster.coordinator_request(group_id, request)
        assert isinstance(response, ShareGroupHeartbeatResponse)
        error = error_or_none(response.error_code, response.error_message)
        if not isinstance(error, CoordinatorError) or time.monotonic() > deadline:
            break
        # A fresh broker is still loading its coordinators: retry after a backoff, as a
        # member does (the coordinator request forgets a moved coordinator itself).
        await asyncio.sleep(RETRY_BACKOFF_S)
    assert error is None, error
    return response


async def join_share_group(
    cluster: ClusterClient, group_id: str, topic_id: uuid.UUID, topic: str, partitions: int
) -> ShareMember:
    """Join with epoch 0 and heartbeat at the broker's interval until every partition is ours."""
    member = ShareMember(group_id, str(uuid.uuid4()), 0, 500)

    async def converge() -> None:
        topics: tuple[str, ...] | None = (topic,)
        while member.assignment.get(topic_id, frozenset()) != frozenset(range(partitions)):
            response = await share_heartbeat(
                cluster, group_id, member.member_id, member.epoch, topics
            )
            topics = None
            member.epoch = int(response.member_epoch)
            member.interval_ms = int(response.heartbeat_interval.total_seconds() * 1000)
            if response.assignment is not None:
                member.assignment = {
                    entry.topic_id: frozenset(int(p) for p in entry.partitions)
                    for entry in response.assignment.topic_partitions
                    if entry.topic_id is not None
                }
            if member.assignment.get(topic_id, frozenset()) != frozenset(range(partitions)):
                # The protocol's own schedule: heartbeat again after the broker's interval.
                await asyncio.sleep(member.interval_ms / 1000)

    await asyncio.wait_for(converge(), JOIN_BOUND_S)
    return member


@dataclass
class SessionDriver:
    """Sends a ShareSession's planned requests to one leader and applies the outcomes."""

    connection: BrokerConnection
    group_id: str
    member_id: str
    session: ShareSession
    parameters: ShareFetchParameters = field(default_factory=ShareFetchParameters)
    epochs_sent: list[int] = field(default_factory=list)
    #: The raw ``records`` bytes of every partition of every fetch response, as received.
    raw_records: list[bytes] = field(default_factory=list)
    #: The codecs of every batch decoded so far.
    codecs_seen: set[Compression] = field(default_factory=set)

    async def fetch(
        self,
        wanted: set[TopicIdPartition],
        acks: dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]] | None = None,
        *,
        max_wait_ms: int | None = None,
        epoch_override: int | None = None,
    ) -> tuple[ShareFetchResult, SessionOutcome]:
        plan = self.session.fetch(wanted, acks)
        epoch = plan.epoch if epoch_override is None else epoch_override
        self.epochs_sent.append(epoch)
        request = build_share_fetch_request(
            self.connection.api_version(ApiKey.SHARE_FETCH),
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=epoch,
            max_wait_ms=self.parameters.max_wait_ms if max_wait_ms is None else max_wait_ms,
            min_bytes=self.parameters.min_bytes,
            max_bytes=self.parameters.max_bytes,
            max_records=self.parameters.max_records,
            batch_size=self.parameters.batch_size,
            acquire_mode=self.parameters.acquire_mode,
            topics=plan.wire_topics(),
            forgotten=plan.wire_forgotten(),
            is_renew_ack=plan.is_renew_ack,
        )
        response = await self.connection.request(request)
        assert isinstance(response, ShareFetchResponseV1 | ShareFetchResponseV2)
        self.raw_records.extend(
            bytes(p.records) for topic in response.responses for p in topic.partitions if p.records
        )
        result = parse_share_fetch_response(response)
        for partition in result.partitions:
            self.codecs_seen.update(batch.compression for batch in partition.records.batches)
        outcome = self.session.on_response(None if result.error is None else result.error.name)
        return result, outcome

    async def acknowledge(
        self, acks: dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]], *, close: bool = False
    ) -> tuple[ShareAcknowledgeResult, SessionOutcome]:
        plan = self.session.close(acks) if close else self.session.acknowledge(acks)
        assert plan is not None
        self.epochs_sent.append(plan.epoch)
        request = build_share_acknowledge_request(
            self.connection.api_version(ApiKey.SHARE_ACKNOWLEDGE),
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=plan.epoch,
            topics=plan.wire_topics(),
            is_renew_ack=plan.is_renew_ack,
        )
        result = parse_share_acknowledge_response(await self.connection.request(request))
        outcome = self.session.on_response(None if result.error is None else result.error.name)
        return result, outcome

    async def fetch_until(
        self, wanted: set[TopicIdPartition], count: int, *, bound_s: float = 20.0
    ) -> list[tuple[Record, int]]:
        """Fetch (no acks) until ``count`` acquired records arrived; returns (record, count)."""
        delivered: list[tuple[Record, int]] = []
        deadline = time.monotonic() + bound_s
        while len(delivered) < count:
            assert time.monotonic() < deadline, f"only {len(delivered)} of {count} records came"
            result, _ = await self.fetch(wanted)
            assert result.error is None, result.error
            for partition in result.partitions:
                assert partition.error is None, partition.error
                assert not partition.records.corrupt_batches, partition.records.corrupt_batches
                acquired = filter_acquired(
                    partition.records.records, partition.acquired, partition.records.corrupt_batches
                )
                delivered.extend(acquired.delivered)
        return delivered
