"""An in-memory simulation of the server side of KIP-848 reconciliation (one consumer group).

It answers :class:`~consumer.member.commands.HeartbeatRequest` objects the way the Kafka group
coordinator does, closely enough to replay the KIP's case studies:

* the group epoch is bumped when a member joins, leaves, is expired or changes its subscription, and
  when the partition count of a subscribed topic changes;
* a new target assignment is computed (at the group epoch) by a sticky *uniform* assignor: every
  member keeps what it had up to its quota, freed partitions go to the members with fewest, ties
  broken by join order;
* each member advances per the KIP's rules (``CurrentAssignmentBuilder`` in the broker): a
  member that must revoke is told so at its current epoch and moves to the target epoch only once
  a heartbeat shows it released the partitions; a member whose new partitions are still owned by
  another member moves to the target epoch without them and receives them when they are released;
* requests are validated like the broker does (INVALID_REQUEST), epochs are checked
  (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; a lower epoch is accepted only if it is the previous
  epoch and the reported partitions are a subset of the assignment), sessions expire, and a member
  that does not revoke within its rebalance timeout is removed.

Simplifications: regex subscriptions match topic names with ``re.fullmatch`` (not RE2J); a static
member's temporary leave (-2) is treated like a leave; assignment is computed at once (no batching).
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from consumer.member.commands import CommitOffsets, FetchCommittedOffsets, HeartbeatRequest
from consumer.member.errors_table import ErrorCode
from consumer.member.partitions import TopicIdPartition, TopicPartition


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """What the simulated coordinator answers (mirrors the ConsumerGroupHeartbeat response)."""

    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicIdPartition] | None = None


class ServerMemberState(enum.Enum):
    """The broker's view of a member's reconciliation."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked"
    UNRELEASED_PARTITIONS = "unreleased"


@dataclass(slots=True)
class SimMember:
    """The coordinator's record of one member."""

    member_id: str
    join_order: int
    instance_id: str | None
    rebalance_timeout_ms: int
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: ServerMemberState = ServerMemberState.STABLE
    assigned: frozenset[TopicIdPartition] = frozenset()
    pending_revocation: frozenset[TopicIdPartition] = frozenset()
    last_heartbeat_ms: int = 0
    revocation_deadline_ms: int | None = None


@dataclass(slots=True)
class _Topic:
    topic_id: uuid.UUID
    partitions: int


@dataclass(slots=True)
class CoordinatorSim:
    """One simulated consumer group on one simulated coordinator."""

    group_id: str = "group"
    heartbeat_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    group_epoch: int = 0
    target_epoch: int = 0
    members: dict[str, SimMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicIdPartition]] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    removed_members: list[str] = field(default_factory=list)
    _topics: dict[str, _Topic] = field(default_factory=dict)
    _join_counter: int = 0

    # --- topics -----------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, topic_id: uuid.UUID | None = None
    ) -> uuid.UUID:
        """Create a topic; bumps the group epoch if a member subscribes to it."""
        tid = topic_id or uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-topic:{name}")
        self._topics[name] = _Topic(tid, partitions)
        if any(self._subscribes(m, name) for m in self.members.values()):
            self.group_epoch += 1
        return tid

    def add_partitions(self, name: str, partitions: int) -> None:
        """Grow ``name`` to ``partitions`` partitions (the coordinator bumps the group epoch)."""
        topic = self._topics[name]
        if partitions <= topic.partitions:
            raise ValueError("partition counts only grow")
        topic.partitions = partitions
        if any(self._subscribes(m, name) for m in self.members.values()):
            self.group_epoch += 1

    def topic_id(self, name: str) -> uuid.UUID:
        """The id of topic ``name``."""
        return self._topics[name].topic_id

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id to name for every topic (what a metadata response would say)."""
        return {topic.topic_id: name for name, topic in self._topics.items()}

    def named(self, partitions: Iterable[TopicIdPartition]) -> tuple[TopicPartition, ...]:
        """Partitions by name, sorted."""
        names = self.topic_names()
        return tuple(sorted(TopicPartition(names[p.topic_id], p.partition) for p in partitions))

    def _subscribes(self, member: SimMember, topic: str) -> bool:
        if topic in member.topic_names:
            return True
        return (
            member.topic_regex is not None and re.fullmatch(member.topic_regex, topic) is not None
        )

    # --- heartbeats -------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResponse:
        """Process one ConsumerGroupHeartbeat request at ``now_ms``."""
        self.expire(now_ms)
        problem = self._validate(request)
        if problem is not None:
            return HeartbeatResponse(ErrorCode.INVALID_REQUEST, problem)
        if request.member_epoch < 0:
            self._remove(request.member_id)
            return HeartbeatResponse(member_id=request.member_id, member_epoch=request.member_epoch)
        is_new = request.member_id not in self.members
        if request.member_epoch == 0:
            error = self._join(request, now_ms)
        else:
            error = self._check_epoch(request)
        if error is not None:
            return HeartbeatResponse(error, member_id=request.member_id)
        member = self.members[request.member_id]
        member.last_heartbeat_ms = now_ms
        if self._update_subscription(member, request) and not is_new:
            self.group_epoch += 1
        reported = None
        if request.topic_partitions is not None:
            reported = frozenset(
                TopicIdPartition(entry.topic_id, p)
                for entry in request.topic_partitions
                for p in entry.partitions
            )
        self._maybe_compute_target()
        before = member.assigned
        self._advance(member, reported, now_ms)
        include = request.member_epoch == 0 or request.is_full or member.assigned != before
        return HeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=member.assigned if include else None,
        )

    def _validate(self, request: HeartbeatRequest) -> str | None:
        if not request.group_id or request.group_id != self.group_id:
            return "GroupId can't be empty or unknown."
        if not request.member_id:
            return "MemberId can't be empty."
        if request.instance_id is not None and not request.instance_id:
            return "InstanceId can't be empty."
        if request.rack_id is not None and not request.rack_id:
            return "RackId can't be empty."
        if request.member_epoch < -2 or (request.member_epoch == -2 and not request.instance_id):
            return "MemberEpoch is invalid."
        if request.member_epoch == 0:
            if request.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if request.topic_partitions != ():
                return "TopicPartitions must be empty when (re-)joining."
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        return None

    def _join(self, request: HeartbeatRequest, now_ms: int) -> int | None:
        if request.instance_id is not None:
            holder = next(
                (
                    m
                    for m in self.members.values()
                    if m.instance_id == request.instance_id and m.member_id != request.member_id
                ),
                None,
            )
            if holder is not None:
                return ErrorCode.UNRELEASED_INSTANCE_ID
        existing = self.members.get(request.member_id)
        if existing is not None:
            # A rejoin (epoch 0) is always accepted: the member released everything as lost.
            existing.epoch = 0
            existing.previous_epoch = -1
            existing.assigned = frozenset()
            existing.pending_revocation = frozenset()
            existing.state = ServerMemberState.STABLE
            existing.revocation_deadline_ms = None
            return None
        self._join_counter += 1
        self.members[request.member_id] = SimMember(
            member_id=request.member_id,
            join_order=self._join_counter,
            instance_id=request.instance_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            last_heartbeat_ms=now_ms,
        )
        self.group_epoch += 1
        return None

    def _check_epoch(self, request: HeartbeatRequest) -> int | None:
        member = self.members.get(request.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.member_epoch == member.epoch:
            return None
        if request.member_epoch == member.previous_epoch and request.topic_partitions is not None:
            owned = {
                TopicIdPartition(e.topic_id, p)
                for e in request.topic_partitions
                for p in e.partitions
            }
            if owned <= member.assigned:
                return None
        return ErrorCode.FENCED_MEMBER_EPOCH

    def _update_subscription(self, member: SimMember, request: HeartbeatRequest) -> bool:
        names = request.subscribed_topic_names
        regex = request.subscribed_topic_regex
        changed = False
        if names is not None and tuple(sorted(names)) != member.topic_names:
            member.topic_names = tuple(sorted(names))
            changed = True
        if regex is not None and (regex or None) != member.topic_regex:
            member.topic_regex = regex or None
            changed = True
        return changed

    # --- membership changes -----------------------------------------------------------------

    def expire(self, now_ms: int) -> list[str]:
        """Remove members whose session or revocation deadline passed; returns their ids."""
        gone = [
            m.member_id
            for m in self.members.values()
            if now_ms - m.last_heartbeat_ms > self.session_timeout_ms
            or (m.revocation_deadline_ms is not None and now_ms > m.revocation_deadline_ms)
        ]
        for member_id in gone:
            self._remove(member_id)
        return gone

    def next_expiry_ms(self) -> int | None:
        """The earliest time a member would be expired."""
        times = [m.last_heartbeat_ms + self.session_timeout_ms + 1 for m in self.members.values()]
        times += [
            m.revocation_deadline_ms + 1
            for m in self.members.values()
            if m.revocation_deadline_ms is not None
        ]
        return min(times) if times else None

    def _remove(self, member_id: str) -> None:
        if self.members.pop(member_id, None) is not None:
            self.target.pop(member_id, None)
            self.removed_members.append(member_id)
            self.group_epoch += 1

    # --- assignment -------------------------------------------------------------------------

    def _maybe_compute_target(self) -> None:
        if self.group_epoch == self.target_epoch:
            return
        self.target = self.compute_uniform_assignment()
        self.target_epoch = self.group_epoch

    def _all_partitions(self) -> dict[TopicIdPartition, list[SimMember]]:
        """Every subscribed partition and the members eligible for it (in join order)."""
        members = sorted(self.members.values(), key=lambda m: m.join_order)
        eligible: dict[TopicIdPartition, list[SimMember]] = {}
        for name, topic in sorted(self._topics.items()):
            subscribers = [m for m in members if self._subscribes(m, name)]
            if subscribers:
                for p in range(topic.partitions):
                    eligible[TopicIdPartition(topic.topic_id, p)] = subscribers
        return eligible

    def compute_uniform_assignment(self) -> dict[str, frozenset[TopicIdPartition]]:
        """The sticky uniform target for the current members and topics."""
        eligible = self._all_partitions()
        members = sorted(self.members.values(), key=lambda m: m.join_order)
        if not members:
            return {}
        kept = {
            m.member_id: sorted(
                p for p in self.target.get(m.member_id, ()) if m in eligible.get(p, ())
            )
            for m in members
        }
        base, extra = divmod(len(eligible), len(members))
        by_holdings = sorted(members, key=lambda m: (-len(kept[m.member_id]), m.join_order))
        quota = {m.member_id: base + (1 if i < extra else 0) for i, m in enumerate(by_holdings)}
        result = {mid: parts[: quota[mid]] for mid, parts in kept.items()}
        taken = {p for parts in result.values() for p in parts}
        for partition in sorted(p for p in eligible if p not in taken):
            chosen = min(
                eligible[partition],
                key=lambda m: (
                    len(result[m.member_id]) >= quota[m.member_id],
                    len(result[m.member_id]),
                    m.join_order,
                ),
            )
            result[chosen.member_id].append(partition)
        return {mid: frozenset(parts) for mid, parts in result.items()}

    def _owned_by_others(self, member: SimMember) -> set[TopicIdPartition]:
        owned: set[TopicIdPartition] = set()
        for other in self.members.values():
            if other is not member:
                owned |= other.assigned | other.pending_revocation
        return owned

    def _advance(
        self, member: SimMember, reported: frozenset[TopicIdPartition] | None, now_ms: int
    ) -> None:
        """The KIP's per-member reconciliation step (``CurrentAssignmentBuilder``).

        A member revoking partitions leaves that state only on a heartbeat that reports its owned
        partitions (non-null) without the ones pending revocation.
        """
        if member.state is ServerMemberState.UNREVOKED_PARTITIONS:
            if reported is None or reported & member.pending_revocation:
                return
            member.pending_revocation = frozenset()
            member.revocation_deadline_ms = None
        elif member.state is ServerMemberState.STABLE and member.epoch == self.target_epoch:
            return
        target = self.target.get(member.member_id, frozenset())
        revoke = member.assigned - target
        if revoke:
            member.state = ServerMemberState.UNREVOKED_PARTITIONS
            member.assigned = member.assigned & target
            member.pending_revocation = revoke
            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            return
        wanted = target - member.assigned
        free = wanted - self._owned_by_others(member)
        member.assigned = member.assigned | free
        if member.epoch != self.target_epoch:
            member.previous_epoch = member.epoch
            member.epoch = self.target_epoch
        member.state = (
            ServerMemberState.UNRELEASED_PARTITIONS if wanted - free else ServerMemberState.STABLE
        )

    # --- offsets ----------------------------------------------------------------------------

    def commit(self, request: CommitOffsets) -> dict[TopicPartition, int]:
        """OffsetCommit: per-partition error codes (STALE_MEMBER_EPOCH on a wrong epoch)."""
        code = self._offset_request_error(request.member_id, request.member_epoch)
        if code == ErrorCode.NONE:
            self.committed.update(request.offsets)
        return {tp: code for tp in request.offsets}

    def fetch(self, request: FetchCommittedOffsets) -> tuple[dict[TopicPartition, int | None], int]:
        """OffsetFetch: the committed offsets and a request-level error code.

        A fetch without member id and epoch (an admin client, or a consumer not yet in the
        group) is always accepted, as the broker does; otherwise the member and epoch must match.
        """
        if request.member_id is None and request.member_epoch < 0:
            code: int = ErrorCode.NONE
        else:
            code = self._offset_request_error(request.member_id, request.member_epoch)
        if code != ErrorCode.NONE:
            return {}, code
        return {tp: self.committed.get(tp) for tp in request.partitions}, 0

    def _offset_request_error(self, member_id: str | None, epoch: int) -> int:
        if member_id is None or epoch < 0:
            return ErrorCode.NONE if not self.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if epoch == member.epoch else ErrorCode.STALE_MEMBER_EPOCH

    # --- views for assertions ---------------------------------------------------------------

    def member_assignment(self, member_id: str) -> tuple[int, tuple[TopicPartition, ...]]:
        """``(epoch, partitions)`` of the member as the coordinator sees it."""
        member = self.members[member_id]
        return member.epoch, self.named(member.assigned)

    def target_assignment(self, member_id: str) -> tuple[TopicPartition, ...]:
        """The member's partitions in the current target assignment."""
        return self.named(self.target.get(member_id, ()))
