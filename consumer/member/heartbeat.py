"""HeartbeatRequestManager: when to heartbeat and what each heartbeat carries.

Scheduling (Java ``AbstractHeartbeatRequestManager``; the pacing is the generic
:class:`~consumer.member.pacing.HeartbeatPacer`, shared with the share member):

* nothing is sent while the coordinator is unknown (a :class:`FindCoordinator` is asked for once);
* JOINING and ACK_ASSIGNMENT send at once when nothing is in flight (an ack carries the partitions
  now owned), as does a heartbeat expedited by a STALE_MEMBER_EPOCH commit error;
* other heartbeating states send when the interval since the latest heartbeat was sent elapsed (a
  value <= 0 is ignored; a new interval also counts from that send), the error backoff elapsed and
  nothing is in flight: one non-leave heartbeat at a time;
* a leave heartbeat (epoch -1, or -2 for a static member) goes out at once, even with one in flight;
* after an error the interval timer is cleared, so only the backoff (100 ms doubling to 1 s, +/-20 %
  jitter, by default) gates the retry; fencing and coordinator moves reset the backoff.

Field inclusion (reference B.1, Java column): GroupId, MemberId and MemberEpoch always; InstanceId
on every heartbeat when configured; RackId only while JOINING; RebalanceTimeoutMs, the subscription
and ServerAssignor while JOINING or when they differ from what was last sent; TopicPartitions empty
while JOINING, otherwise when the reported partitions or their local epoch differ from what was last
sent. The reported partitions are the owned ones plus any the member may still hand to the
application (its target, a running round's), so that a full request sent mid-round cannot release
partitions about to reach ``on_assign`` (Java reports only the reconciled ones).
Any failure or coordinator change forgets what was sent, so the next heartbeat is a full request.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from consumer.member.commands import (
    JOIN_EPOCH,
    UNCHANGED_REBALANCE_TIMEOUT_MS,
    Command,
    HeartbeatRequest,
    SendHeartbeat,
)
from consumer.member.config import MemberConfig
from consumer.member.pacing import ExponentialBackoff, HeartbeatPacer, generate_member_id
from consumer.member.partitions import TopicIdPartition, TopicPartitions, group_by_topic
from consumer.member.states import StateInfo

__all__ = [
    "ExponentialBackoff",
    "HeartbeatRequestManager",
    "HeartbeatSource",
    "generate_member_id",
]


class HeartbeatSource(Protocol):
    """What the member says in its next heartbeat (read only when one is built)."""

    @property
    def member_epoch(self) -> int:
        """The member epoch."""

    @property
    def topic_names(self) -> tuple[str, ...] | None:
        """Subscribed topic names (None with a regex subscription)."""

    @property
    def topic_regex(self) -> str | None:
        """Subscribed regex (None with a name subscription)."""

    @property
    def reported_owned_ids(self) -> frozenset[TopicIdPartition]:
        """The partitions to report as owned, by topic id: the owned ones and any the member
        may still hand to the application (target, running round)."""

    @property
    def owned_local_epoch(self) -> int:
        """The local epoch of the owned assignment (bumped by each new target)."""


class HeartbeatRequestManager(HeartbeatPacer):
    """Schedules heartbeats and builds each request with only the fields that changed."""

    def __init__(
        self, config: MemberConfig, rng: random.Random, next_id: Callable[[], int]
    ) -> None:
        self._config = config
        #: What the coordinator knows of this member: the last value sent for each field
        #: (None: nothing known, the next heartbeat is a full request).
        self._sent: HeartbeatRequest | None = None
        self._sent_owned_local_epoch = 0
        self._names_ever_sent = False
        self._regex_ever_sent = False
        #: The owned set last grouped for the wire, and its grouping: the owned set is replaced,
        #: never changed, so an idle member's heartbeats skip the O(partitions) sort.
        self._grouped_owned: tuple[frozenset[TopicIdPartition], tuple[TopicPartitions, ...]] = (
            frozenset(),
            (),
        )
        super().__init__(config, rng, next_id)

    def forget_sent(self) -> None:
        """The next heartbeat is a full request."""
        self._sent = None

    def poll(
        self, now_ms: int, info: StateInfo, source: HeartbeatSource
    ) -> tuple[list[Command], bool]:
        """The coordinator lookup and the heartbeat due now in a state described by ``info``.

        Returns the commands and whether a heartbeat carrying the owned partitions was sent.
        """
        lookups, due = self.due(now_ms, info)
        commands: list[Command] = list(lookups)
        if not due:
            return commands, False
        request_id = self._next_id()
        commands.append(
            SendHeartbeat(request_id, self.build(source, request_id, now_ms, info.joins))
        )
        return commands, True

    # --- building ---------------------------------------------------------------------------

    def build(
        self, source: HeartbeatSource, request_id: int, now_ms: int, joining: bool
    ) -> HeartbeatRequest:
        """Build the next heartbeat with only the changed fields and record it as in flight."""
        config = self._config
        sent = None if joining else self._sent
        rebalance_timeout_ms = UNCHANGED_REBALANCE_TIMEOUT_MS
        if sent is None or sent.rebalance_timeout_ms != config.rebalance_timeout_ms:
            rebalance_timeout_ms = config.rebalance_timeout_ms
        names, regex = self._subscription_fields(source, sent, joining)
        assignor = None
        if config.server_assignor is not None and (
            sent is None or sent.server_assignor != config.server_assignor
        ):
            assignor = config.server_assignor
        owned: tuple[TopicPartitions, ...] = () if joining else self._owned_by_topic(source)
        local_epoch = 0 if joining else source.owned_local_epoch
        topic_partitions: tuple[TopicPartitions, ...] | None = owned
        if (
            sent is not None
            and sent.topic_partitions == owned
            and self._sent_owned_local_epoch == local_epoch
        ):
            topic_partitions = None
        request = HeartbeatRequest(
            group_id=config.group_id,
            member_id=self.member_id,
            member_epoch=JOIN_EPOCH if joining else source.member_epoch,
            instance_id=config.instance_id,
            rack_id=config.rack_id if joining else None,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=topic_partitions,
        )
        previous = self._sent
        self._sent = HeartbeatRequest(
            group_id=config.group_id,
            member_id=self.member_id,
            member_epoch=request.member_epoch,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            subscribed_topic_names=(
                names if names is not None or previous is None else previous.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                regex if regex is not None or previous is None else previous.subscribed_topic_regex
            ),
            server_assignor=config.server_assignor,
            topic_partitions=owned,
        )
        self._sent_owned_local_epoch = local_epoch
        self._names_ever_sent = self._names_ever_sent or bool(names)
        self._regex_ever_sent = self._regex_ever_sent or bool(regex)
        self.mark_sent(request_id, now_ms)
        return request

    def _owned_by_topic(self, source: HeartbeatSource) -> tuple[TopicPartitions, ...]:
        owned_ids = source.reported_owned_ids
        last_ids, last_grouped = self._grouped_owned
        if owned_ids is last_ids:
            return last_grouped
        grouped = group_by_topic(owned_ids)
        self._grouped_owned = (owned_ids, grouped)
        return grouped

    def _subscription_fields(
        self, source: HeartbeatSource, sent: HeartbeatRequest | None, joining: bool
    ) -> tuple[tuple[str, ...] | None, str | None]:
        names: tuple[str, ...] | None = None
        regex: str | None = None
        sent_names = None if sent is None else sent.subscribed_topic_names
        sent_regex = None if sent is None else sent.subscribed_topic_regex
        if source.topic_regex is not None:
            if sent is None or sent_regex != source.topic_regex:
                regex = source.topic_regex
            if not joining and self._names_ever_sent and sent_names != ():
                names = ()  # drop names a previous subscription left on the broker
        else:
            wanted = source.topic_names or ()
            if sent is None or sent_names != wanted:
                names = wanted
            if not joining and self._regex_ever_sent and sent_regex != "":
                regex = ""  # drop a previously sent pattern
        return names, regex

    def build_leave(self, member_epoch: int, request_id: int) -> HeartbeatRequest:
        """Build a leave heartbeat (epoch -1 or -2); its answer will be ignored."""
        self.mark_leave(request_id)
        return HeartbeatRequest(
            group_id=self._config.group_id,
            member_id=self.member_id,
            member_epoch=member_epoch,
            instance_id=self._config.instance_id,
        )
