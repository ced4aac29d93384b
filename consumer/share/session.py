"""Share sessions: one per member per share-partition leader (KIP-932). Sans-I/O.

A session is opened by a full ShareFetch at epoch 0 (every partition, no acknowledgements), then
each request (ShareFetch or ShareAcknowledge, one at a time) carries the next epoch, 1, 2, ...,
wrapping from 2^31-1 back to 1, never 0. Incremental fetches add new partitions and forget
dropped ones, and carry acknowledgements; epoch -1 closes the session (with final
acknowledgements, releasing everything else). SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH and SHARE_SESSION_LIMIT_REACHED, and any disconnect, reset the session
to epoch 0: the acknowledgements of that request fail, and queued ones must not ride on the
epoch-0 fetch (the broker answers INVALID_REQUEST). The old session's acquired records come back
when their locks expire (observed on Kafka 4.3.1: the epoch-0 fetch does not release them).
Any other top-level error still advances the epoch, as the Java client does.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from consumer.share.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
    TopicIdPartition,
)

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "MAX_EPOCH",
    "SESSION_RESET_ERRORS",
    "SessionOutcome",
    "ShareAcknowledgePlan",
    "ShareFetchPlan",
    "ShareSession",
    "next_epoch",
    "route_by_leader",
]

INITIAL_EPOCH: Final = 0
"""Opens (or replaces) a session: a full fetch without acknowledgements."""
FINAL_EPOCH: Final = -1
"""Closes a session."""
MAX_EPOCH: Final = 2**31 - 1
"""The last epoch before the sequence wraps to 1."""
SESSION_RESET_ERRORS: Final = frozenset(
    {
        "SHARE_SESSION_NOT_FOUND",
        "INVALID_SHARE_SESSION_EPOCH",
        "SHARE_SESSION_LIMIT_REACHED",
    }
)
"""Top-level errors after which the next request opens a new session at epoch 0."""

AcknowledgementMap = Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 0 -> 1, ..., 2^31-1 -> 1 (never back to 0); -1 stays -1."""
    if epoch == FINAL_EPOCH:
        return FINAL_EPOCH
    if epoch < 0 or epoch > MAX_EPOCH:
        raise ValueError(f"share session epoch {epoch} is outside -1..{MAX_EPOCH}")
    return 1 if epoch == MAX_EPOCH else epoch + 1


def _wire_topics(
    partitions: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]],
) -> dict[uuid.UUID, dict[int, tuple[AcknowledgementBatch, ...]]]:
    topics: dict[uuid.UUID, dict[int, tuple[AcknowledgementBatch, ...]]] = {}
    for partition, batches in sorted(partitions.items()):
        topics.setdefault(partition.topic_id, {})[partition.partition] = batches
    return topics


def _has_renew(acknowledgements: AcknowledgementMap) -> bool:
    return any(
        AcknowledgeType.RENEW in batch.types
        for batches in acknowledgements.values()
        for batch in batches
    )


@dataclass(frozen=True, slots=True)
class ShareFetchPlan:
    """What the next ShareFetch to this session's node carries.

    ``partitions`` are sent in ``Topics`` (each with the acknowledgements riding on it, possibly
    none); ``forgotten`` go in ``ForgottenTopicsData``.
    """

    node_id: int
    epoch: int
    partitions: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]
    forgotten: frozenset[TopicIdPartition] = frozenset()

    @property
    def acknowledgements(self) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
        """The acknowledgements riding on this fetch, by partition."""
        return {partition: acks for partition, acks in self.partitions.items() if acks}

    @property
    def is_renew_ack(self) -> bool:
        """Whether a RENEW rides on it (the request must say so, and be v2)."""
        return _has_renew(self.partitions)

    def wire_topics(self) -> dict[uuid.UUID, dict[int, tuple[AcknowledgementBatch, ...]]]:
        """``topics`` for ``build_share_fetch_request``."""
        return _wire_topics(self.partitions)

    def wire_forgotten(self) -> dict[uuid.UUID, list[int]]:
        """``forgotten`` for ``build_share_fetch_request``."""
        forgotten: dict[uuid.UUID, list[int]] = {}
        for partition in sorted(self.forgotten):
            forgotten.setdefault(partition.topic_id, []).append(partition.partition)
        return forgotten


@dataclass(frozen=True, slots=True)
class ShareAcknowledgePlan:
    """What the next ShareAcknowledge to this session's node carries (epoch -1: closing)."""

    node_id: int
    epoch: int
    acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]

    @property
    def is_renew_ack(self) -> bool:
        """Whether a RENEW rides on it (the request must say so, and be v2)."""
        return _has_renew(self.acknowledgements)

    def wire_topics(self) -> dict[uuid.UUID, dict[int, tuple[AcknowledgementBatch, ...]]]:
        """``topics`` for ``build_share_acknowledge_request``."""
        return _wire_topics(self.acknowledgements)


class SessionOutcome(enum.Enum):
    """What a response did to the session."""

    ADVANCED = "advanced"
    """The request counted: the epoch moved on (its acknowledgements have per-partition results)."""
    RESET = "reset"
    """The session is gone: the request's acknowledgements failed; the next fetch is a full one."""
    CLOSED = "closed"
    """The closing request was answered; the session is over."""


class SessionBusyError(RuntimeError):
    """A second request for a session while one is in flight (they share one epoch sequence)."""


@dataclass
class ShareSession:
    """The share session of one member with one broker (``node_id``)."""

    node_id: int
    epoch: int = INITIAL_EPOCH
    partitions: frozenset[TopicIdPartition] = frozenset()
    in_flight: bool = False
    closing: bool = False
    closed: bool = False
    _after_response: frozenset[TopicIdPartition] = field(default=frozenset(), repr=False)

    @property
    def accepts_acknowledgements(self) -> bool:
        """Whether acknowledgements can go now: not at epoch 0 (a new session has no acquired
        records, and the broker refuses them there)."""
        return self.epoch != INITIAL_EPOCH and not self.closed

    def fetch(
        self, wanted: Iterable[TopicIdPartition], acknowledgements: AcknowledgementMap | None = None
    ) -> ShareFetchPlan:
        """Plan the next ShareFetch: ``wanted`` are the partitions this node should serve now.

        At epoch 0 every wanted partition is sent. Afterwards new partitions and partitions with
        acknowledgements are sent, and partitions no longer wanted are forgotten (a partition no
        longer wanted but with acknowledgements is sent with them and forgotten next time).

        Raises:
            SessionBusyError: a request is in flight, or the session is closed.
            ValueError: acknowledgements at epoch 0 (fail them instead: the broker refuses
                them; the records come back when their locks expire).
        """
        self._check_idle()
        acks = {
            partition: batches for partition, batches in (acknowledgements or {}).items() if batches
        }
        wanted_set = frozenset(wanted)
        if self.epoch == INITIAL_EPOCH:
            if acks:
                raise ValueError(
                    "acknowledgements cannot ride on a new share session's epoch-0 ShareFetch; "
                    "fail them (those records come back when their locks expire)"
                )
            send: dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = {
                partition: () for partition in wanted_set
            }
            forgotten: frozenset[TopicIdPartition] = frozenset()
        else:
            send = {
                partition: acks.get(partition, ()) for partition in wanted_set - self.partitions
            }
            send.update(acks)
            forgotten = self.partitions - wanted_set - acks.keys()
        self.in_flight = True
        self._after_response = (self.partitions | send.keys()) - forgotten
        return ShareFetchPlan(self.node_id, self.epoch, send, forgotten)

    def acknowledge(self, acknowledgements: AcknowledgementMap) -> ShareAcknowledgePlan:
        """Plan a ShareAcknowledge with ``acknowledgements`` at the next epoch.

        Raises:
            SessionBusyError: a request is in flight, or the session is closed.
            ValueError: the session is at epoch 0 (ShareAcknowledge cannot open a session).
        """
        self._check_idle()
        if self.epoch == INITIAL_EPOCH:
            raise ValueError(
                "ShareAcknowledge needs an open share session (epoch > 0); this one is at 0"
            )
        self.in_flight = True
        self._after_response = self.partitions
        return ShareAcknowledgePlan(self.node_id, self.epoch, dict(acknowledgements))

    def close(
        self, acknowledgements: AcknowledgementMap | None = None
    ) -> ShareAcknowledgePlan | None:
        """Plan the closing ShareAcknowledge (epoch -1) with final acknowledgements; None when
        no session is open on the broker (epoch 0), so there is nothing to close."""
        self._check_idle()
        if self.epoch == INITIAL_EPOCH:
            self.closed = True
            return None
        self.in_flight = True
        self.closing = True
        return ShareAcknowledgePlan(self.node_id, FINAL_EPOCH, dict(acknowledgements or {}))

    def on_response(self, error_name: str | None) -> SessionOutcome:
        """Apply the top-level outcome of the in-flight request (``error_name`` as Kafka names
        it, e.g. ``INVALID_SHARE_SESSION_EPOCH``; None for success)."""
        if not self.in_flight:
            raise RuntimeError(
                f"no request in flight for the share session with node {self.node_id}"
            )
        self.in_flight = False
        if self.closing:
            self.closed = True
            self.partitions = frozenset()
            return SessionOutcome.CLOSED
        if error_name in SESSION_RESET_ERRORS:
            self.reset()
            return SessionOutcome.RESET
        self.partitions = self._after_response
        self.epoch = next_epoch(self.epoch)
        return SessionOutcome.ADVANCED

    def on_disconnect(self) -> SessionOutcome:
        """The connection to the node dropped: the broker side of the session is gone."""
        self.in_flight = False
        if self.closing:
            self.closed = True
            return SessionOutcome.CLOSED
        self.reset()
        return SessionOutcome.RESET

    def reset(self) -> None:
        """Start over: the next request is a full fetch at epoch 0."""
        self.epoch = INITIAL_EPOCH
        self.partitions = frozenset()
        self._after_response = frozenset()

    def _check_idle(self) -> None:
        if self.closed or self.closing:
            raise SessionBusyError(f"the share session with node {self.node_id} is closed")
        if self.in_flight:
            raise SessionBusyError(
                f"a request to node {self.node_id} is in flight; share sessions allow one at a time"
            )


def route_by_leader(
    partitions: Iterable[TopicIdPartition], leaders: Mapping[TopicIdPartition, int]
) -> tuple[dict[int, frozenset[TopicIdPartition]], frozenset[TopicIdPartition]]:
    """Group ``partitions`` by leader node; also return those without a known leader (-1 or
    missing), for which metadata must be refreshed."""
    by_node: dict[int, set[TopicIdPartition]] = {}
    unknown: set[TopicIdPartition] = set()
    for partition in partitions:
        leader = leaders.get(partition, -1)
        if leader < 0:
            unknown.add(partition)
        else:
            by_node.setdefault(leader, set()).add(partition)
    return {node: frozenset(members) for node, members in by_node.items()}, frozenset(unknown)
