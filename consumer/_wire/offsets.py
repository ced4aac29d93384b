"""OffsetCommit (key 8) and OffsetFetch (key 9) for consumer-protocol members.

v9 carries the member id and epoch; v10 addresses topics by id instead of name. As in the Java
client, v10 is used only when the broker offers it **and** every topic's id is known
(:func:`offsets_version`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias, TypeVar

from kio.schema.offset_commit.v9 import request as commit_v9
from kio.schema.offset_commit.v9 import response as commit_response_v9
from kio.schema.offset_commit.v10 import request as commit_v10
from kio.schema.offset_commit.v10 import response as commit_response_v10
from kio.schema.offset_fetch.v9 import request as fetch_v9
from kio.schema.offset_fetch.v9 import response as fetch_response_v9
from kio.schema.offset_fetch.v10 import request as fetch_v10
from kio.schema.offset_fetch.v10 import response as fetch_response_v10
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, UnsupportedBrokerError, error_or_none

from ._by_version import by_version

__all__ = [
    "CommittedOffset",
    "OffsetCommitFields",
    "OffsetCommitRequest",
    "OffsetFetchFields",
    "OffsetFetchRequest",
    "OffsetFetchResult",
    "OffsetToCommit",
    "PartitionCommitResult",
    "TopicPartition",
    "build_offset_commit_request",
    "build_offset_fetch_request",
    "offsets_version",
    "parse_offset_commit_response",
    "parse_offset_fetch_response",
]

OffsetCommitRequest: TypeAlias = commit_v9.OffsetCommitRequest | commit_v10.OffsetCommitRequest
OffsetFetchRequest: TypeAlias = fetch_v9.OffsetFetchRequest | fetch_v10.OffsetFetchRequest
_FIRST_MEMBER_VERSION: Final = 9
_FIRST_TOPIC_ID_VERSION: Final = 10
_RequestT = TypeVar("_RequestT")
#: A request class and the classes of its two levels of entries.
_Classes: TypeAlias = tuple[Callable[..., _RequestT], Callable[..., object], Callable[..., object]]
#: Per version: the OffsetCommit request, topic and partition classes.
_COMMIT_CLASSES: Final[Mapping[int, _Classes[OffsetCommitRequest]]] = {
    9: (
        commit_v9.OffsetCommitRequest,
        commit_v9.OffsetCommitRequestTopic,
        commit_v9.OffsetCommitRequestPartition,
    ),
    10: (
        commit_v10.OffsetCommitRequest,
        commit_v10.OffsetCommitRequestTopic,
        commit_v10.OffsetCommitRequestPartition,
    ),
}
#: Per version: the OffsetFetch request, group and topic classes.
_FETCH_CLASSES: Final[Mapping[int, _Classes[OffsetFetchRequest]]] = {
    9: (
        fetch_v9.OffsetFetchRequest,
        fetch_v9.OffsetFetchRequestGroup,
        fetch_v9.OffsetFetchRequestTopics,
    ),
    10: (
        fetch_v10.OffsetFetchRequest,
        fetch_v10.OffsetFetchRequestGroup,
        fetch_v10.OffsetFetchRequestTopics,
    ),
}


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """A partition by topic name, with the topic id when it is known."""

    topic: str
    partition: int
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    """One offset to commit: the next offset to consume, as Kafka stores it."""

    topic: str
    partition: int
    offset: int
    topic_id: uuid.UUID | None = None
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitFields:
    """An OffsetCommit from a group member (epoch -1 and empty id for a non-member commit)."""

    group_id: str
    member_id: str
    member_epoch: int
    offsets: Sequence[OffsetToCommit]
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionCommitResult:
    """The outcome of one partition's commit."""

    topic: str | None
    topic_id: uuid.UUID | None
    partition: int
    error: BrokerError | None


@dataclass(frozen=True, slots=True)
class OffsetFetchFields:
    """An OffsetFetch for one group; ``partitions=None`` asks for every committed partition."""

    group_id: str
    partitions: Sequence[TopicPartition] | None
    member_id: str | None = None
    member_epoch: int = -1
    require_stable: bool = True


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed offset (-1 when nothing is committed for the partition)."""

    topic: str | None
    topic_id: uuid.UUID | None
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    error: BrokerError | None


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """The group-level error (if any) and the per-partition offsets."""

    group_id: str
    error: BrokerError | None
    offsets: tuple[CommittedOffset, ...]


def offsets_version(max_version: int, topic_ids: Iterable[uuid.UUID | None]) -> int:
    """The OffsetCommit/OffsetFetch version to use.

    Args:
        max_version: the version negotiated with the coordinator.
        topic_ids: the ids of the topics in the request (None where unknown).

    Raises:
        UnsupportedBrokerError: the broker offers neither v9 nor v10.
    """
    if max_version < _FIRST_MEMBER_VERSION:
        raise UnsupportedBrokerError(
            f"committing offsets as a consumer-protocol member needs v{_FIRST_MEMBER_VERSION}+, "
            f"the broker offers up to v{max_version}"
        )
    if max_version >= _FIRST_TOPIC_ID_VERSION and all(tid is not None for tid in topic_ids):
        return _FIRST_TOPIC_ID_VERSION
    return _FIRST_MEMBER_VERSION


def build_offset_commit_request(fields: OffsetCommitFields, version: int) -> OffsetCommitRequest:
    """The OffsetCommit request for ``fields`` at ``version`` (9 or 10).

    Raises:
        ValueError: an unknown version, or v10 with a topic whose id is unknown.
    """
    by_topic: dict[tuple[str, uuid.UUID | None], list[OffsetToCommit]] = {}
    for entry in fields.offsets:
        by_topic.setdefault((entry.topic, entry.topic_id), []).append(entry)
    make_request, make_topic, make_partition = by_version("OffsetCommit", version, _COMMIT_CLASSES)
    return make_request(
        group_id=GroupId(fields.group_id),
        generation_id_or_member_epoch=i32(fields.member_epoch),
        member_id=fields.member_id,
        group_instance_id=fields.instance_id,
        topics=tuple(
            make_topic(
                **_topic_key(version, topic, topic_id, "OffsetCommit"),
                partitions=tuple(
                    make_partition(
                        partition_index=i32(entry.partition),
                        committed_offset=i64(entry.offset),
                        committed_leader_epoch=i32(entry.leader_epoch),
                        committed_metadata=entry.metadata,
                    )
                    for entry in entries
                ),
            )
            for (topic, topic_id), entries in by_topic.items()
        ),
    )


def _topic_key(
    version: int, topic: str, topic_id: uuid.UUID | None, api: str
) -> dict[str, TopicName | uuid.UUID]:
    """How a request topic is named: by name up to v9, by id from v10 (which must be known)."""
    if version < _FIRST_TOPIC_ID_VERSION:
        return {"name": TopicName(topic)}
    if topic_id is None:
        raise ValueError(f"{api} v10 needs the id of topic {topic!r}; use v9 or resolve it first")
    return {"topic_id": topic_id}


def parse_offset_commit_response(
    response: ResponsePayload, *, topic_names_by_id: Mapping[uuid.UUID, str] | None = None
) -> list[PartitionCommitResult]:
    """Per-partition outcomes of an OffsetCommit (errors are returned, not raised).

    ``topic_names_by_id`` fills in topic names for v10 responses, which carry only ids.
    """
    names = topic_names_by_id or {}
    if not isinstance(
        response, commit_response_v9.OffsetCommitResponse | commit_response_v10.OffsetCommitResponse
    ):
        raise ProtocolError(
            f"expected an OffsetCommit v9/v10 response, got {type(response).__name__}"
        )
    results: list[PartitionCommitResult] = []
    for topic in response.topics:
        name: str | None
        if isinstance(topic, commit_response_v9.OffsetCommitResponseTopic):
            name, topic_id = topic.name, None
        else:
            topic_id = topic.topic_id
            name = names.get(topic_id) if topic_id is not None else None
        results.extend(
            PartitionCommitResult(
                topic=name,
                topic_id=topic_id,
                partition=int(partition.partition_index),
                error=error_or_none(partition.error_code),
            )
            for partition in topic.partitions
        )
    return results


def build_offset_fetch_request(fields: OffsetFetchFields, version: int) -> OffsetFetchRequest:
    """The OffsetFetch request for one group at ``version`` (9 or 10).

    Raises:
        ValueError: an unknown version, or v10 with a topic whose id is unknown.
    """
    grouped: dict[tuple[str, uuid.UUID | None], list[int]] = {}
    for tp in fields.partitions or ():
        grouped.setdefault((tp.topic, tp.topic_id), []).append(tp.partition)
    make_request, make_group, make_topic = by_version("OffsetFetch", version, _FETCH_CLASSES)
    return make_request(
        require_stable=fields.require_stable,
        groups=(
            make_group(
                group_id=GroupId(fields.group_id),
                member_id=fields.member_id,
                member_epoch=i32(fields.member_epoch),
                topics=None
                if fields.partitions is None
                else tuple(
                    make_topic(
                        **_topic_key(version, topic, topic_id, "OffsetFetch"),
                        partition_indexes=tuple(i32(p) for p in partitions),
                    )
                    for (topic, topic_id), partitions in grouped.items()
                ),
            ),
        ),
    )


def parse_offset_fetch_response(
    response: ResponsePayload, *, topic_names_by_id: Mapping[uuid.UUID, str] | None = None
) -> OffsetFetchResult:
    """The committed offsets of the single group we asked for (errors returned, not raised).

    Raises:
        ProtocolError: not an OffsetFetch v9/v10 response, or not exactly one group in it.
    """
    names = topic_names_by_id or {}
    if not isinstance(
        response, fetch_response_v9.OffsetFetchResponse | fetch_response_v10.OffsetFetchResponse
    ):
        raise ProtocolError(
            f"expected an OffsetFetch v9/v10 response, got {type(response).__name__}"
        )
    if len(response.groups) != 1:
        raise ProtocolError(f"expected one group in OffsetFetch, got {len(response.groups)}")
    group = response.groups[0]
    offsets: list[CommittedOffset] = []
    if isinstance(group, fetch_response_v9.OffsetFetchResponseGroup):
        for topic_v9 in group.topics:
            offsets.extend(_committed(p, topic_v9.name, None) for p in topic_v9.partitions)
    else:
        for topic_v10 in group.topics:
            topic_id = topic_v10.topic_id
            name = names.get(topic_id) if topic_id is not None else None
            offsets.extend(_committed(p, name, topic_id) for p in topic_v10.partitions)
    return OffsetFetchResult(
        group_id=group.group_id, error=error_or_none(group.error_code), offsets=tuple(offsets)
    )


def _committed(
    partition: fetch_response_v9.OffsetFetchResponsePartitions
    | fetch_response_v10.OffsetFetchResponsePartitions,
    topic: str | None,
    topic_id: uuid.UUID | None,
) -> CommittedOffset:
    return CommittedOffset(
        topic=topic,
        topic_id=topic_id,
        partition=int(partition.partition_index),
        offset=int(partition.committed_offset),
        leader_epoch=int(partition.committed_leader_epoch),
        metadata=partition.metadata,
        error=error_or_none(partition.error_code),
    )
