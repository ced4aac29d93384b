"""Configuration of one member (frozen; validated on construction).

Settings that are configuration keys take their defaults from the key table
(``consumer._config.spec``, pure data), so ``MemberConfig(group_id="g")`` is the member of a
``Consumer`` built with the default configuration. The others are the member's own constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer._config.spec import spec_default
from consumer.member.errors import MemberConfigError

#: Relative jitter of every backoff, as Java's ``CommonClientConfigs.RETRY_BACKOFF_JITTER``.
RETRY_BACKOFF_JITTER = 0.2
#: Heartbeat interval until the broker states one (its ``group.consumer.heartbeat.interval.ms``
#: default).
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
#: How long retriable errors of an asynchronous user commit are retried (60 s, as Java's
#: ``default.api.timeout.ms``).
USER_COMMIT_TIMEOUT_MS = 60_000
#: Fields that must be positive.
_POSITIVE = (
    "rebalance_timeout_ms",
    "max_poll_interval_ms",
    "auto_commit_interval_ms",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "default_heartbeat_interval_ms",
    "user_commit_timeout_ms",
)

#: Fields that take one of a few values.
_CHOICES = {
    "auto_offset_reset": ("earliest", "latest", "error"),
    "isolation_level": ("read_committed", "read_uncommitted"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberConfig:
    """Settings of the group side of a consumer.

    Attributes:
        group_id: the consumer group (``group.id``); must be non-empty.
        instance_id: ``group.instance.id`` for static membership, or None.
        rack_id: ``client.rack``, sent while joining, or None.
        rebalance_timeout_ms: sent as ``RebalanceTimeoutMs`` on join; also bounds the pre-revocation
            commit and the wait for a revocation to complete.
        max_poll_interval_ms: ``max.poll.interval.ms``; when the application does not poll for this
            long the member leaves the group (state STALE). Java uses one value for both; so do
            the defaults.
        server_assignor: ``group.remote.assignor`` or None for the broker default.
        auto_commit: ``enable.auto.commit``.
        auto_commit_interval_ms: ``auto.commit.interval.ms``.
        retry_backoff_ms: ``retry.backoff.ms``, the first backoff after a failed request
            (doubles per failure).
        retry_backoff_max_ms: ``retry.backoff.max.ms``, the backoff cap.
        retry_backoff_jitter: relative jitter of the backoff (0.2 means +/-20 %).
        default_heartbeat_interval_ms: interval used until the first response states one.
        user_commit_timeout_ms: how long retriable errors of a user commit are retried.
        auto_offset_reset: ``auto.offset.reset``: where a new partition without a committed
            offset starts. For ``earliest`` and ``latest`` the round looks the absolute offset
            up (ListOffsets) before it hands the partition over; ``error`` leaves it to the
            data plane.
        isolation_level: ``isolation.level``; with ``read_committed`` the latest offset is the
            last stable offset.
    """

    group_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = spec_default("max.poll.interval.ms", int)
    max_poll_interval_ms: int = spec_default("max.poll.interval.ms", int)
    server_assignor: str | None = None
    auto_commit: bool = spec_default("enable.auto.commit", bool)
    auto_commit_interval_ms: int = spec_default("auto.commit.interval.ms", int)
    retry_backoff_ms: int = spec_default("retry.backoff.ms", int)
    retry_backoff_max_ms: int = spec_default("retry.backoff.max.ms", int)
    retry_backoff_jitter: float = RETRY_BACKOFF_JITTER
    default_heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    user_commit_timeout_ms: int = USER_COMMIT_TIMEOUT_MS
    auto_offset_reset: str = spec_default("auto.offset.reset", str)
    isolation_level: str = spec_default("isolation.level", str)

    def __post_init__(self) -> None:
        if not self.group_id:
            raise MemberConfigError("group_id must be a non-empty string")
        for name in ("instance_id", "rack_id", "server_assignor"):
            value = getattr(self, name)
            if value is not None and not value:
                raise MemberConfigError(f"{name} must be None or a non-empty string")
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise MemberConfigError(f"{name} must be positive")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise MemberConfigError("retry_backoff_max_ms must be >= retry_backoff_ms")
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise MemberConfigError(
                    f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        if not 0.0 <= self.retry_backoff_jitter < 1.0:
            raise MemberConfigError("retry_backoff_jitter must be in [0, 1)")
