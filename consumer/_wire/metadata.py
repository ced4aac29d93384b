"""Metadata (key 3): brokers, topics, topic ids <-> names, partition leaders.

Versions v10-v13: all return topic ids; v12+ can also look topics up by id.
"""

from __future__ import annotations

import types
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from kio.schema.metadata import v10, v11, v12, v13
from kio.schema.metadata.v10 import request as request_v10
from kio.schema.metadata.v11 import request as request_v11
from kio.schema.metadata.v12 import request as request_v12
from kio.schema.metadata.v13 import request as request_v13
from kio.schema.types import TopicName
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, UnsupportedBrokerError, error_or_none

from ._by_version import by_version

__all__ = [
    "BrokerAddress",
    "ClusterMetadata",
    "MetadataRequest",
    "MetadataResponse",
    "PartitionMetadata",
    "TopicMetadata",
    "build_metadata_request",
    "parse_metadata_response",
]

MetadataRequest: TypeAlias = (
    v10.MetadataRequest | v11.MetadataRequest | v12.MetadataRequest | v13.MetadataRequest
)
MetadataResponse: TypeAlias = (
    v10.MetadataResponse | v11.MetadataResponse | v12.MetadataResponse | v13.MetadataResponse
)
_RESPONSE_CLASSES: Final = (
    v10.MetadataResponse,
    v11.MetadataResponse,
    v12.MetadataResponse,
    v13.MetadataResponse,
)
_FIRST_VERSION_BY_ID: Final = 12
_Classes: TypeAlias = tuple[Callable[..., MetadataRequest], Callable[..., object]]
#: Per version: the request class and its topic entry class.
_REQUEST_TYPES: Final[Mapping[int, _Classes]] = {
    10: (v10.MetadataRequest, request_v10.MetadataRequestTopic),
    11: (v11.MetadataRequest, request_v11.MetadataRequestTopic),
    12: (v12.MetadataRequest, request_v12.MetadataRequestTopic),
    13: (v13.MetadataRequest, request_v13.MetadataRequestTopic),
}


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where a broker listens."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port} (node {self.node_id})"


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition of a topic as metadata describes it."""

    partition: int
    leader_id: int
    leader_epoch: int
    error: BrokerError | None = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic: its name and id (either may be missing when the lookup failed)."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: Mapping[int, PartitionMetadata]
    is_internal: bool = False
    error: BrokerError | None = None


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """The parsed result of a Metadata request (immutable: the members of a process may share
    one, see ``consumer._runtime.cluster``)."""

    cluster_id: str | None
    controller_id: int
    brokers: Mapping[int, BrokerAddress]
    topics: tuple[TopicMetadata, ...] = field(default=())

    def topic_ids_by_name(self) -> dict[str, uuid.UUID]:
        """Name -> id for every topic that came back without error."""
        return {
            topic.name: topic.topic_id
            for topic in self.topics
            if topic.error is None and topic.name is not None and topic.topic_id is not None
        }

    def topic_names_by_id(self) -> dict[uuid.UUID, str]:
        """Id -> name for every topic that came back without error."""
        return {topic_id: name for name, topic_id in self.topic_ids_by_name().items()}

    def topic(self, name_or_id: str | uuid.UUID) -> TopicMetadata | None:
        """The entry for a topic name or id, if the response had one."""
        for topic in self.topics:
            if name_or_id in (topic.name, topic.topic_id):
                return topic
        return None


def build_metadata_request(
    version: int,
    topics: Sequence[str] | Sequence[uuid.UUID] | None = None,
    *,
    allow_auto_topic_creation: bool = False,
) -> MetadataRequest:
    """A Metadata request.

    Args:
        version: 10 to 13.
        topics: None for every topic, an empty sequence for brokers only, topic names, or topic
            ids (v12+).

    Raises:
        UnsupportedBrokerError: topic ids were given for a version below 12.
    """
    by_id = topics is not None and any(isinstance(topic, uuid.UUID) for topic in topics)
    if by_id and version < _FIRST_VERSION_BY_ID:
        raise UnsupportedBrokerError(
            f"looking topics up by id needs Metadata v{_FIRST_VERSION_BY_ID}+, "
            f"the broker offers up to v{version}"
        )
    make_request, make_topic = by_version("Metadata", version, _REQUEST_TYPES)
    # v10 is the last version that can ask for the cluster's authorized operations.
    extra = {"include_cluster_authorized_operations": False} if version == 10 else {}
    return make_request(
        topics=None
        if topics is None
        else tuple(
            make_topic(topic_id=topic, name=None)
            if isinstance(topic, uuid.UUID)
            else make_topic(topic_id=None, name=TopicName(topic))
            for topic in topics
        ),
        allow_auto_topic_creation=allow_auto_topic_creation,
        include_topic_authorized_operations=False,
        **extra,
    )


def parse_metadata_response(response: ResponsePayload) -> ClusterMetadata:
    """Brokers and topics from a Metadata response; per-topic errors stay on each topic.

    Raises:
        BrokerError: a top-level error (v13+).
        ProtocolError: ``response`` is not a Metadata response.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(f"expected a Metadata response, got {type(response).__name__}")
    if isinstance(response, v13.MetadataResponse):
        top_level_error = error_or_none(response.error_code)
        if top_level_error is not None:
            raise top_level_error
    brokers = {
        int(broker.node_id): BrokerAddress(
            node_id=int(broker.node_id), host=broker.host, port=int(broker.port), rack=broker.rack
        )
        for broker in response.brokers
    }
    topics = tuple(
        TopicMetadata(
            name=topic.name,
            topic_id=topic.topic_id,
            partitions=types.MappingProxyType(
                {
                    int(partition.partition_index): PartitionMetadata(
                        partition=int(partition.partition_index),
                        leader_id=int(partition.leader_id),
                        leader_epoch=int(partition.leader_epoch),
                        error=error_or_none(partition.error_code),
                    )
                    for partition in topic.partitions
                }
            ),
            is_internal=topic.is_internal,
            error=error_or_none(topic.error_code),
        )
        for topic in response.topics
    )
    return ClusterMetadata(
        cluster_id=response.cluster_id,
        controller_id=int(response.controller_id),
        brokers=types.MappingProxyType(brokers),
        topics=topics,
    )
