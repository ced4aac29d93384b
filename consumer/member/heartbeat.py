"""HeartbeatRequestManager: when to heartbeat and what each heartbeat carries.

Scheduling (Java ``AbstractHeartbeatRequestManager``):

* nothing is sent while the coordinator is unknown (a :class:`FindCoordinator` is asked for once);
* JOINING and ACK_ASSIGNMENT send at once when nothing is in flight (an ack carries the partitions
  now owned), as does a heartbeat expedited by a STALE_MEMBER_EPOCH commit error;
* other heartbeating states send when the interval from the latest response elapsed (a value <= 0 is
  ignored), the error backoff elapsed and nothing is in flight: one non-leave heartbeat at a time;
* a leave heartbeat (epoch -1, or -2 for a static member) goes out at once, even with one in flight;
* after an error the interval timer is cleared, so only the backoff (100 ms doubling to 1 s, +/-20 %
  jitter, by default) gates the retry; fencing and coordinator moves reset the backoff.

Field inclusion (reference B.1, Java column): GroupId, MemberId and MemberEpoch always; InstanceId
on every heartbeat when configured; RackId only while JOINING; RebalanceTimeoutMs, the subscription
and ServerAssignor while JOINING or when they differ from what was last sent; TopicPartitions empty
while JOINING, otherwise when the owned partitions or their local epoch differ from what was last
sent. Any failure or coordinator change forgets what was sent, so the next heartbeat is a full
request.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Protocol

from consumer.member.commands import (
    JOIN_EPOCH,
    UNCHANGED_REBALANCE_TIMEOUT_MS,
    Command,
    FindCoordinator,
    HeartbeatRequest,
    SendHeartbeat,
)
from consumer.member.config import MemberConfig
from consumer.member.partitions import TopicIdPartition, TopicPartitions, group_by_topic
from consumer.member.states import Heartbeats, StateInfo


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
    def owned_ids(self) -> frozenset[TopicIdPartition]:
        """The owned partitions, by topic id."""

    @property
    def owned_local_epoch(self) -> int:
        """The local epoch of the owned assignment (bumped by each new target)."""


def generate_member_id(rng: random.Random) -> str:
    """A Java-style member id: 16 random bytes as URL-safe base64 without padding (22 chars).

    Ids that are all zero bytes or start with ``-`` are re-drawn. Pass ``random.SystemRandom()`` in
    production (ids must be unique across processes); tests pass a seeded ``random.Random``.
    """
    while True:
        raw = rng.randbytes(16)
        if raw == bytes(16):
            continue
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


class ExponentialBackoff:
    """``base_ms * 2**(attempts-1)`` capped at ``max_ms``, times a jitter factor in [1-j, 1+j]."""

    def __init__(self, base_ms: int, max_ms: int, jitter: float, rng: random.Random) -> None:
        self._base_ms = base_ms
        self._max_ms = max_ms
        self._jitter = jitter
        self._rng = rng

    def delay_ms(self, attempts: int) -> int:
        """Backoff after ``attempts`` consecutive failures (``attempts >= 1``)."""
        exponent = min(max(attempts, 1) - 1, 30)
        term = min(self._max_ms, self._base_ms * (2**exponent))
        factor = self._rng.uniform(1.0 - self._jitter, 1.0 + self._jitter) if self._jitter else 1.0
        return max(0, int(term * factor))


class HeartbeatRequestManager:
    """Schedules heartbeats and builds each request with only the fields that changed."""

    def __init__(
        self, config: MemberConfig, rng: random.Random, next_id: Callable[[], int]
    ) -> None:
        self._config = config
        self._next_id = next_id
        self.member_id: str = generate_member_id(rng)
        self._backoff = ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms, config.retry_backoff_jitter, rng
        )
        self.coordinator_known = False
        self._coordinator_requested = False
        self._in_flight: int | None = None
        self._leave_request_ids: set[int] = set()
        self.interval_ms = config.default_heartbeat_interval_ms
        self._next_interval_send_ms = 0
        self._backoff_until_ms = 0
        self._lookup_not_before_ms = 0
        self._failed_attempts = 0
        self._expedited = False
        #: What the coordinator knows of this member: the last value sent for each field
        #: (None: nothing known, the next heartbeat is a full request).
        self._sent: HeartbeatRequest | None = None
        self._sent_owned_local_epoch = 0
        self._names_ever_sent = False
        self._regex_ever_sent = False

    # --- coordinator ------------------------------------------------------------------------

    def should_request_coordinator(self, now_ms: int) -> bool:
        """True once per loss of the coordinator (after any backoff): emit FindCoordinator."""
        if self.coordinator_known or self._coordinator_requested:
            return False
        if now_ms < self._lookup_not_before_ms:
            return False
        self._coordinator_requested = True
        return True

    def coordinator_lookup_due_ms(self) -> int | None:
        """When the next coordinator lookup may be asked for; None if none is pending."""
        if self.coordinator_known or self._coordinator_requested:
            return None
        return self._lookup_not_before_ms

    def on_lookup_failed(self, now_ms: int) -> None:
        """A coordinator lookup failed: the next one waits for the (growing) backoff."""
        self.on_failure(now_ms, reset_backoff=False)
        self._lookup_not_before_ms = self._backoff_until_ms

    @property
    def failed_attempts(self) -> int:
        """Consecutive failures (heartbeats or coordinator lookups) since the last success."""
        return self._failed_attempts

    def on_coordinator_changed(self) -> None:
        """A coordinator is known: forget in-flight requests, send a full request next."""
        self.coordinator_known = True
        self._coordinator_requested = False
        self._lookup_not_before_ms = 0
        self._forget_in_flight()

    def on_coordinator_lost(self) -> None:
        """The coordinator must be looked up again; in-flight answers will be ignored."""
        self.coordinator_known = False
        self._coordinator_requested = False
        self._forget_in_flight()

    def _forget_in_flight(self) -> None:
        self._in_flight = None
        self._leave_request_ids.clear()
        self._sent = None

    # --- scheduling -------------------------------------------------------------------------

    @property
    def in_flight(self) -> bool:
        """True while a non-leave heartbeat awaits its answer."""
        return self._in_flight is not None

    def expedite(self) -> None:
        """Send the next heartbeat without waiting for the interval (backoff still applies)."""
        self._expedited = True

    def poll(
        self, now_ms: int, info: StateInfo, source: HeartbeatSource
    ) -> tuple[list[Command], bool]:
        """The coordinator lookup and the heartbeat due now in a state described by ``info``.

        Returns the commands and whether a heartbeat carrying the owned partitions was sent.
        """
        if info.heartbeats is Heartbeats.NONE:
            return [], False
        commands: list[Command] = []
        if self.should_request_coordinator(now_ms):
            commands.append(FindCoordinator(self._config.group_id))
        due_ms = self.next_due_ms(info)
        if due_ms is None or now_ms < due_ms:
            return commands, False
        request_id = self._next_id()
        commands.append(
            SendHeartbeat(request_id, self.build(source, request_id, now_ms, info.joins))
        )
        return commands, True

    def next_due_ms(self, info: StateInfo) -> int | None:
        """When the next non-leave heartbeat is due, or None if none is planned."""
        if info.heartbeats is Heartbeats.NONE:
            return None
        if not self.coordinator_known or self._in_flight is not None:
            return None
        if info.heartbeats is Heartbeats.AT_ONCE or self._expedited:
            return self._backoff_until_ms
        return max(self._backoff_until_ms, self._next_interval_send_ms)

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
        owned: tuple[TopicPartitions, ...] = () if joining else group_by_topic(source.owned_ids)
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

    def mark_sent(self, request_id: int, now_ms: int) -> None:
        """A (non-leave) heartbeat of any kind went out: one in flight, the interval restarts."""
        self._in_flight = request_id
        self._expedited = False
        self._next_interval_send_ms = now_ms + self.interval_ms

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
        self._leave_request_ids.add(request_id)
        self._sent = None
        self._failed_attempts = 0
        self._backoff_until_ms = 0
        return HeartbeatRequest(
            group_id=self._config.group_id,
            member_id=self.member_id,
            member_epoch=member_epoch,
            instance_id=self._config.instance_id,
        )

    # --- answers ----------------------------------------------------------------------------

    def take_answer(self, request_id: int) -> bool:
        """True if ``request_id`` is the non-leave heartbeat in flight; the answer to a leave
        heartbeat is consumed and ignored (False), as is any other late answer."""
        return not self.is_leave(request_id) and self.is_current(request_id)

    def is_current(self, request_id: int) -> bool:
        """True if ``request_id`` is the non-leave heartbeat in flight."""
        return self._in_flight == request_id

    def is_leave(self, request_id: int) -> bool:
        """True if ``request_id`` is a leave heartbeat (its answer is consumed and ignored)."""
        if request_id in self._leave_request_ids:
            self._leave_request_ids.discard(request_id)
            return True
        return False

    def on_success(self, heartbeat_interval_ms: int, now_ms: int) -> None:
        """The in-flight heartbeat succeeded."""
        self._in_flight = None
        self._failed_attempts = 0
        if heartbeat_interval_ms > 0 and heartbeat_interval_ms != self.interval_ms:
            self.interval_ms = heartbeat_interval_ms
            self._next_interval_send_ms = now_ms + heartbeat_interval_ms

    def on_failure(self, now_ms: int, *, reset_backoff: bool) -> None:
        """The in-flight heartbeat failed: full request next, retry after the backoff."""
        self._in_flight = None
        self._sent = None
        self._next_interval_send_ms = now_ms
        if reset_backoff:
            self._failed_attempts = 0
            self._backoff_until_ms = now_ms
        else:
            self._failed_attempts += 1
            self._backoff_until_ms = now_ms + self._backoff.delay_ms(self._failed_attempts)

    def reset_for_rejoin(self, now_ms: int) -> None:
        """Fenced or leaving: drop the in-flight request, reset backoff and sent-field memory."""
        self._in_flight = None
        self._sent = None
        self._failed_attempts = 0
        self._backoff_until_ms = now_ms
        self._next_interval_send_ms = now_ms
        self._expedited = False
