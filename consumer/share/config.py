"""Configuration of one share-group member (frozen; validated on construction).

A share member has no rebalance timeout, static membership, assignor or offset commits
(KIP-932): only the group, the rack, the poll timer and the retry backoff. Defaults of the keys
come from the key table (``consumer._config.spec``), as for :class:`~consumer.member.MemberConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer._config.spec import spec_default
from consumer.member.config import DEFAULT_HEARTBEAT_INTERVAL_MS, RETRY_BACKOFF_JITTER
from consumer.member.errors import MemberConfigError

_POSITIVE = (
    "max_poll_interval_ms",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "default_heartbeat_interval_ms",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareMemberConfig:
    """Settings of the group side of a share consumer.

    Attributes:
        group_id: the share group (``group.id``); must be non-empty.
        rack_id: ``client.rack``, sent while joining, or None.
        max_poll_interval_ms: ``max.poll.interval.ms``; when the application does not poll for
            this long the member leaves the group (state STALE) and rejoins on the next poll.
        retry_backoff_ms: ``retry.backoff.ms``, the first backoff after a failed heartbeat.
        retry_backoff_max_ms: ``retry.backoff.max.ms``, the backoff cap.
        retry_backoff_jitter: relative jitter of the backoff (0.2 means +/-20 %).
        default_heartbeat_interval_ms: interval used until the first response states one (the
            broker's ``group.share.heartbeat.interval.ms`` default).
    """

    group_id: str
    rack_id: str | None = None
    max_poll_interval_ms: int = spec_default("max.poll.interval.ms", int)
    retry_backoff_ms: int = spec_default("retry.backoff.ms", int)
    retry_backoff_max_ms: int = spec_default("retry.backoff.max.ms", int)
    retry_backoff_jitter: float = RETRY_BACKOFF_JITTER
    default_heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS

    def __post_init__(self) -> None:
        if not self.group_id:
            raise MemberConfigError("group_id must be a non-empty string")
        if self.rack_id is not None and not self.rack_id:
            raise MemberConfigError("rack_id must be None or a non-empty string")
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise MemberConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise MemberConfigError("retry_backoff_max_ms must be >= retry_backoff_ms")
        if not 0.0 <= self.retry_backoff_jitter < 1.0:
            raise MemberConfigError("retry_backoff_jitter must be in [0, 1)")
