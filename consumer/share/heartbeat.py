"""ShareHeartbeatManager: when the share member heartbeats and what each heartbeat carries.

Pacing (interval, one in flight, at-once sends, backoff, coordinator discovery) is the generic
:class:`~consumer.member.pacing.HeartbeatPacer`. What is share-specific is the request
(ShareGroupHeartbeat v1 has no rebalance timeout, instance id, assignor, regex or owned
partitions) and the field inclusion, as the Java ``ShareHeartbeatRequestManager``:

* GroupId, MemberId and MemberEpoch always (epoch 0 while JOINING);
* RackId only while JOINING;
* SubscribedTopicNames while JOINING, after any error or coordinator change (a full request), and
  whenever the names differ from those last sent; otherwise null ("unchanged");
* the leave heartbeat (epoch -1) carries only the group, the member id and the epoch. In a state
  that ``leaves`` it goes out as soon as the coordinator is known, even with another heartbeat in
  flight.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable

from consumer.member.commands import JOIN_EPOCH, LEAVE_EPOCH
from consumer.member.pacing import HeartbeatPacer
from consumer.member.states import StateInfo
from consumer.share.commands import SendShareHeartbeat, ShareCommand, ShareHeartbeatRequest
from consumer.share.config import ShareMemberConfig


class Sent(enum.Enum):
    """What :meth:`ShareHeartbeatManager.poll` sent."""

    NOTHING = "nothing"
    HEARTBEAT = "a heartbeat"
    LEAVE = "the leave heartbeat"


class ShareHeartbeatManager(HeartbeatPacer):
    """Schedules share heartbeats and builds each one with only the fields that changed."""

    def __init__(
        self, config: ShareMemberConfig, rng: random.Random, next_id: Callable[[], int]
    ) -> None:
        self._config = config
        #: The topic names the coordinator knows (None: unknown, send them next).
        self._sent_names: tuple[str, ...] | None = None
        super().__init__(config, rng, next_id)

    def forget_sent(self) -> None:
        """The next heartbeat is a full request."""
        self._sent_names = None

    def next_due_ms(self, info: StateInfo) -> int | None:
        """When the next heartbeat is due (a leave: at once, once the coordinator is known)."""
        if info.leaves:
            return 0 if self.coordinator_known else None
        return super().next_due_ms(info)

    def poll(
        self, now_ms: int, info: StateInfo, member_epoch: int, topic_names: tuple[str, ...]
    ) -> tuple[list[ShareCommand], Sent]:
        """The coordinator lookup and the heartbeat due now in a state described by ``info``."""
        lookups, due = self.due(now_ms, info)
        commands: list[ShareCommand] = list(lookups)
        if not due:
            return commands, Sent.NOTHING
        request_id = self._next_id()
        if info.leaves:
            commands.append(SendShareHeartbeat(request_id, self.build_leave(request_id)))
            return commands, Sent.LEAVE
        request = self.build(member_epoch, topic_names, request_id, now_ms, joining=info.joins)
        commands.append(SendShareHeartbeat(request_id, request))
        return commands, Sent.HEARTBEAT

    def build(
        self,
        member_epoch: int,
        topic_names: tuple[str, ...],
        request_id: int,
        now_ms: int,
        *,
        joining: bool,
    ) -> ShareHeartbeatRequest:
        """Build the next heartbeat with only the changed fields and record it as in flight."""
        if joining:
            self._sent_names = None
        names = None if self._sent_names == topic_names else topic_names
        request = ShareHeartbeatRequest(
            group_id=self._config.group_id,
            member_id=self.member_id,
            member_epoch=JOIN_EPOCH if joining else member_epoch,
            rack_id=self._config.rack_id if joining else None,
            subscribed_topic_names=names,
        )
        self._sent_names = topic_names
        self.mark_sent(request_id, now_ms)
        return request

    def build_leave(self, request_id: int) -> ShareHeartbeatRequest:
        """Build the leave heartbeat (epoch -1); its answer will be ignored."""
        self.mark_leave(request_id)
        return ShareHeartbeatRequest(
            group_id=self._config.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH
        )
