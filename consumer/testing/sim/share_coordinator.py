"""An in-memory share group coordinator (KIP-932): answers ShareGroupHeartbeat requests.

It answers the :class:`~consumer.share.commands.ShareHeartbeatRequest` objects of a real
:class:`~consumer.share.ShareMember` the way the Kafka group coordinator does for share groups:

* a member joins with epoch 0 and the member id it generated itself; the request must name its
  topics; the group epoch goes up and the member gets the new epoch and its assignment;
* the group epoch goes up when a member joins, leaves (epoch -1), is removed for missing
  heartbeats past the session timeout, changes its topics, or a subscribed topic is created or
  grows; the target assignment is recomputed at once by the ``simple`` assignor's rules
  (:mod:`consumer.testing.sim.share_assignor`);
* share groups have no revocation step: a member moves to the newest epoch and its new
  assignment on its next heartbeat;
* a heartbeat from a member the group does not know (removed, or never joined) with an epoch other
  than 0 gets UNKNOWN_MEMBER_ID, and one with an epoch other than the member's gets
  FENCED_MEMBER_EPOCH; the member then rejoins at epoch 0 with the same member id.

The assignment is sent when the member joins, when its epoch moves and when the request is a full
one (it names its topics); otherwise the response leaves it out ("unchanged").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Final

from consumer.member.commands import JOIN_EPOCH, LEAVE_EPOCH
from consumer.member.partitions import TopicIdPartition
from consumer.share.commands import ShareHeartbeatRequest
from consumer.testing.sim.share_assignor import simple_share_assignment

__all__ = ["ShareCoordinatorSim", "ShareHeartbeatReply", "topic_id_of"]

UNKNOWN_MEMBER_ID: Final = 25
INVALID_REQUEST: Final = 42
FENCED_MEMBER_EPOCH: Final = 110


def topic_id_of(name: str) -> uuid.UUID:
    """The (stable) topic id the simulation gives topic ``name``."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-topic:{name}")


@dataclass(frozen=True, slots=True)
class ShareHeartbeatReply:
    """A ShareGroupHeartbeat response: an error, or the epoch, interval and assignment."""

    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicIdPartition] | None = None


@dataclass(slots=True)
class ShareSimMember:
    """The coordinator's record of one share group member."""

    member_id: str
    join_order: int
    topic_names: frozenset[str]
    rack_id: str | None = None
    epoch: int = 0
    assigned: frozenset[TopicIdPartition] = frozenset()
    last_heartbeat_ms: int = 0


@dataclass
class ShareCoordinatorSim:
    """One simulated share group on its coordinator (see the module docstring).

    Attributes:
        removed_members: member ids removed for missing heartbeats, in order.
    """

    group_id: str = "share-group"
    heartbeat_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    group_epoch: int = 0
    members: dict[str, ShareSimMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicIdPartition]] = field(default_factory=dict)
    removed_members: list[str] = field(default_factory=list)
    _topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    _joins: int = 0

    # --- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        """Make topic ``name`` known; a subscribed topic changes the assignment."""
        topic_id = topic_id_of(name)
        self._topics[name] = (topic_id, partitions)
        if self._subscribed(name):
            self._bump()
        return topic_id

    def add_partitions(self, name: str, partitions: int) -> None:
        """Topic ``name`` now has ``partitions`` partitions."""
        topic_id, _ = self._topics[name]
        self._topics[name] = (topic_id, partitions)
        if self._subscribed(name):
            self._bump()

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for every known topic."""
        return {topic_id: name for name, (topic_id, _) in self._topics.items()}

    # --- heartbeats -------------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest, now_ms: int) -> ShareHeartbeatReply:
        """Answer one ShareGroupHeartbeat at ``now_ms``."""
        self.expire(now_ms)
        if request.group_id != self.group_id:
            return self._error(INVALID_REQUEST, f"group {request.group_id!r} is not this group")
        if not request.member_id:
            return self._error(INVALID_REQUEST, "MemberId can't be empty.")
        member = self.members.get(request.member_id)
        epoch = request.member_epoch
        if epoch == LEAVE_EPOCH:
            if member is not None:
                self._remove(member.member_id)
            return ShareHeartbeatReply(member_id=request.member_id, member_epoch=LEAVE_EPOCH)
        if epoch == JOIN_EPOCH:
            if request.subscribed_topic_names is None and member is None:
                return self._error(
                    INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
                )
            if member is None:
                self._joins += 1
                member = ShareSimMember(request.member_id, self._joins, frozenset())
                self.members[member.member_id] = member
        elif member is None:
            return self._error(
                UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in group {self.group_id}"
            )
        elif epoch != member.epoch:
            return self._error(
                FENCED_MEMBER_EPOCH,
                f"member epoch {epoch} does not match the member's epoch {member.epoch}",
            )
        member.last_heartbeat_ms = now_ms
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        full = request.subscribed_topic_names is not None
        if full:
            names = frozenset(request.subscribed_topic_names or ())
            if names != member.topic_names:
                member.topic_names = names
                self._bump()
        moved = member.epoch != self.group_epoch
        member.epoch = self.group_epoch
        member.assigned = self.target.get(member.member_id, frozenset())
        send = moved or full or epoch == JOIN_EPOCH
        return ShareHeartbeatReply(
            member_id=member.member_id,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=member.assigned if send else None,
        )

    def expire(self, now_ms: int) -> list[str]:
        """Remove members whose last heartbeat is ``session_timeout_ms`` old; returns them."""
        gone = [
            m.member_id
            for m in self.members.values()
            if now_ms - m.last_heartbeat_ms >= self.session_timeout_ms
        ]
        for member_id in gone:
            self._remove(member_id)
            self.removed_members.append(member_id)
        return gone

    def next_expiry_ms(self) -> int | None:
        """When the next member's session runs out (None: no member)."""
        if not self.members:
            return None
        return min(m.last_heartbeat_ms for m in self.members.values()) + self.session_timeout_ms

    # --- internals --------------------------------------------------------------------------

    def _error(self, code: int, message: str) -> ShareHeartbeatReply:
        return ShareHeartbeatReply(error_code=code, error_message=message)

    def _subscribed(self, name: str) -> bool:
        return any(name in m.topic_names for m in self.members.values())

    def _remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self._bump()

    def _bump(self) -> None:
        """A new group epoch and, at once, its target assignment."""
        self.group_epoch += 1
        ordered = sorted(self.members.values(), key=lambda m: m.join_order)
        self.target = simple_share_assignment(
            [(m.member_id, m.topic_names) for m in ordered], self._topics, self.target
        )
