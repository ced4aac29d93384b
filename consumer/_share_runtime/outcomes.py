"""Acknowledgement outcomes: the data plane's per-partition results grouped into the
``(offsets, error)`` calls of the acknowledgement commit callback; and the application's
acknowledgements grouped into runs of consecutive offsets (:func:`ack_runs`) on their way in."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from consumer._share_runtime.events import AcknowledgementsCompleted, RecordSource
from consumer.errors import BrokerError, ConsumerError, error_for_code
from consumer.share.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
    TopicIdPartition,
    encode_acknowledgements,
)

__all__ = [
    "AckResult",
    "AckRun",
    "ack_runs",
    "answered",
    "batches_of",
    "group_outcomes",
    "leader_moved",
    "no_session",
    "reported_offsets",
]

NOT_LEADER_OR_FOLLOWER = 6
SHARE_SESSION_NOT_FOUND = 122

#: One partition's acknowledgements of one request and their outcome (None: applied).
AckResult = tuple[TopicIdPartition, tuple[AcknowledgementBatch, ...], ConsumerError | None]


def batches_of(acks: Mapping[int, AcknowledgeType]) -> tuple[AcknowledgementBatch, ...]:
    """Offset -> type as wire batches (for acknowledgements that fail before being sent)."""
    return encode_acknowledgements(acks)


def reported_offsets(
    batches: Iterable[AcknowledgementBatch], kinds: Callable[[AcknowledgeType], bool]
) -> frozenset[int]:
    """The offsets of ``batches`` whose type ``kinds`` selects."""
    offsets: set[int] = set()
    for batch in batches:
        if len(batch.types) == 1:  # one type for the whole range: no per-offset look-ups
            if kinds(batch.types[0]):
                offsets.update(batch.offsets())
        else:
            offsets.update(
                offset
                for offset, kind in zip(batch.offsets(), batch.types, strict=True)
                if kinds(kind)
            )
    return frozenset(offsets)


_Offsets = dict[tuple[str, int], frozenset[int]]


def _error_key(error: ConsumerError | None) -> tuple[str, int | None, str]:
    if error is None:
        return ("", None, "")
    code = error.code if isinstance(error, BrokerError) else None
    return (type(error).__name__, code, str(error))


def group_outcomes(
    results: Iterable[AckResult],
    names: Mapping[uuid.UUID, str],
    lock_deadline_s: float | None = None,
) -> list[AcknowledgementsCompleted]:
    """One :class:`AcknowledgementsCompleted` per distinct outcome of ``results`` (GAP offsets
    are the client's own and are left out; a group left empty is dropped). ``names`` maps topic
    ids to names."""
    groups: dict[tuple[str, int | None, str], tuple[ConsumerError | None, _Offsets, _Offsets]]
    groups = {}
    for partition, batches, error in results:
        offsets = reported_offsets(batches, lambda kind: kind is not AcknowledgeType.GAP)
        if not offsets:
            continue
        key = (names.get(partition.topic_id, str(partition.topic_id)), partition.partition)
        _, acked, renewed = groups.setdefault(_error_key(error), (error, {}, {}))
        acked[key] = acked.get(key, frozenset()) | offsets
        renew = reported_offsets(batches, lambda kind: kind is AcknowledgeType.RENEW)
        if renew and error is None:
            renewed[key] = renewed.get(key, frozenset()) | renew
    return [
        AcknowledgementsCompleted(acked, error, renewed, lock_deadline_s if renewed else None)
        for error, acked, renewed in groups.values()
    ]


def leader_moved(partition: str, old_node: int, new_node: int) -> BrokerError:
    """The failure of acknowledgements of ``partition`` whose leader moved (NOT_LEADER)."""
    new = "an unknown node" if new_node < 0 else f"node {new_node}"
    return error_for_code(
        NOT_LEADER_OR_FOLLOWER,
        f"the leader of {partition} moved from node {old_node} to {new}; records acquired from "
        "the old leader stay locked there until their lock expires",
    )


def no_session(node: int) -> BrokerError:
    """The failure of acknowledgements for which no share session with ``node`` is open."""
    if node < 0:
        return error_for_code(
            NOT_LEADER_OR_FOLLOWER, "the partition has no known leader for these acknowledgements"
        )
    return error_for_code(
        SHARE_SESSION_NOT_FOUND, f"no open share session with node {node} for these records"
    )


def answered(
    acks: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]],
    error: ConsumerError | None,
    answers: Mapping[TopicIdPartition, ConsumerError | None],
    node: int,
) -> list[AckResult]:
    """The outcome of each partition's acknowledgements sent to ``node``: the response's
    top-level ``error`` when there is one, else the partition's answer (a partition the
    broker did not answer for failed)."""
    unanswered = ConsumerError(f"node {node} did not answer for these acknowledgements")
    return [
        (partition, batches, error if error is not None else answers.get(partition, unanswered))
        for partition, batches in acks.items()
    ]


#: Consecutive offsets of one partition acknowledged alike, from one session: (partition, first
#: offset, last offset, type, the session the records came from).
AckRun = tuple[TopicIdPartition, int, int, AcknowledgeType, RecordSource]


def ack_runs(
    acks: Iterable[tuple[TopicIdPartition, int, AcknowledgeType, RecordSource]],
) -> list[AckRun]:
    """``acks`` as runs (partition, first, last, type, source) of consecutive offsets."""
    runs: list[AckRun] = []
    partition: TopicIdPartition | None = None
    first = last = -2
    kind = AcknowledgeType.ACCEPT
    source = RecordSource(-1, 0)
    for ack_partition, offset, ack_kind, ack_source in acks:
        if (
            offset == last + 1
            and ack_kind is kind
            and ack_partition is partition
            and ack_source is source
        ):
            last = offset
            continue
        if partition is not None:
            runs.append((partition, first, last, kind, source))
        partition, first, last, kind, source = ack_partition, offset, offset, ack_kind, ack_source
    if partition is not None:
        runs.append((partition, first, last, kind, source))
    return runs
