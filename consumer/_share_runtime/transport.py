"""The network side of the share data plane: ShareFetch, ShareAcknowledge and Metadata over the
:class:`~consumer._runtime.cluster.ClusterClient`.

:class:`ShareTransport` is what :class:`~consumer._share_runtime.dataplane.ShareDataPlane`
needs; :class:`ClusterShareTransport` is the real one, and unit tests script a fake cluster
behind the same protocol (no network).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from consumer._runtime.cluster import ClusterClient
from consumer._wire import (
    ApiKey,
    ShareAcknowledgeResult,
    ShareFetchResult,
    build_share_acknowledge_request,
    build_share_fetch_request,
    parse_share_acknowledge_response,
    parse_share_fetch_response,
)
from consumer.share.acknowledgements import TopicIdPartition
from consumer.share.fetch_parameters import ShareFetchParameters
from consumer.share.session import ShareAcknowledgePlan, ShareFetchPlan

__all__ = ["RENEW_MIN_VERSION", "ClusterShareTransport", "Leaders", "ShareTransport"]

#: ShareFetch/ShareAcknowledge version that carries RENEW (KIP-1222).
RENEW_MIN_VERSION: Final = 2


@dataclass(frozen=True, slots=True)
class Leaders:
    """What a metadata lookup taught: topic names and partition leaders (-1: none now)."""

    names: Mapping[uuid.UUID, str]
    leaders: Mapping[TopicIdPartition, int]


class ShareTransport(Protocol):
    """The requests the share data plane sends; each raises ``ConsumerError`` when the
    connection fails (the caller treats that as the loss of the node's share session)."""

    async def share_fetch(self, node_id: int, plan: ShareFetchPlan) -> ShareFetchResult:
        """Send ``plan`` as a ShareFetch to ``node_id``."""
        ...

    async def share_acknowledge(
        self, node_id: int, plan: ShareAcknowledgePlan
    ) -> ShareAcknowledgeResult:
        """Send ``plan`` as a ShareAcknowledge to ``node_id``."""
        ...

    async def leaders(self, topic_ids: Iterable[uuid.UUID]) -> Leaders:
        """Look up names and leaders of ``topic_ids``."""
        ...

    def known_nodes(self) -> frozenset[int]:
        """The broker ids the client can connect to now (from the latest metadata)."""
        ...

    async def renew_supported(self) -> bool:
        """Whether the brokers serve ShareAcknowledge v2 (RENEW)."""
        ...


class ClusterShareTransport:
    """:class:`ShareTransport` on a :class:`ClusterClient`, for one member of one group."""

    def __init__(
        self,
        cluster: ClusterClient,
        group_id: str,
        member_id: str,
        parameters: ShareFetchParameters,
    ) -> None:
        self._cluster = cluster
        self._group_id = group_id
        self._member_id = member_id
        self._parameters = parameters

    async def share_fetch(self, node_id: int, plan: ShareFetchPlan) -> ShareFetchResult:
        connection = await self._cluster.connection_to(node_id)
        parameters = self._parameters
        request = build_share_fetch_request(
            connection.api_version(ApiKey.SHARE_FETCH),
            group_id=self._group_id,
            member_id=self._member_id,
            share_session_epoch=plan.epoch,
            max_wait_ms=parameters.max_wait_ms,
            min_bytes=parameters.min_bytes,
            max_bytes=parameters.max_bytes,
            max_records=parameters.max_records,
            batch_size=parameters.batch_size,
            acquire_mode=parameters.acquire_mode,
            topics=plan.wire_topics(),
            forgotten=plan.wire_forgotten(),
            is_renew_ack=plan.is_renew_ack,
        )
        return parse_share_fetch_response(await connection.request(request))

    async def share_acknowledge(
        self, node_id: int, plan: ShareAcknowledgePlan
    ) -> ShareAcknowledgeResult:
        connection = await self._cluster.connection_to(node_id)
        request = build_share_acknowledge_request(
            connection.api_version(ApiKey.SHARE_ACKNOWLEDGE),
            group_id=self._group_id,
            member_id=self._member_id,
            share_session_epoch=plan.epoch,
            topics=plan.wire_topics(),
            is_renew_ack=plan.is_renew_ack,
        )
        return parse_share_acknowledge_response(await connection.request(request))

    async def leaders(self, topic_ids: Iterable[uuid.UUID]) -> Leaders:
        metadata = await self._cluster.metadata(sorted(set(topic_ids), key=str))
        names: dict[uuid.UUID, str] = {}
        leaders: dict[TopicIdPartition, int] = {}
        for topic in metadata.topics:
            if topic.topic_id is None or topic.name is None or topic.error is not None:
                continue
            names[topic.topic_id] = topic.name
            for index, entry in topic.partitions.items():
                leader = entry.leader_id if entry.error is None else -1
                leaders[TopicIdPartition(topic.topic_id, index)] = leader
        return Leaders(names, leaders)

    def known_nodes(self) -> frozenset[int]:
        return frozenset(self._cluster.brokers)

    async def renew_supported(self) -> bool:
        brokers = sorted(self._cluster.brokers)
        if not brokers:
            await self._cluster.metadata(topics=())
            brokers = sorted(self._cluster.brokers)
        for node in brokers:
            connection = await self._cluster.connection_to(node)
            if connection.versions.version_for(ApiKey.SHARE_ACKNOWLEDGE) < RENEW_MIN_VERSION:
                return False
            if connection.versions.version_for(ApiKey.SHARE_FETCH) < RENEW_MIN_VERSION:
                return False
        return bool(brokers)
