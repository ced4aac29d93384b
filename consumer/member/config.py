"""Configuration of one member (frozen; validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass

from consumer.member.errors import MemberConfigError


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
        retry_backoff_ms: first backoff after a failed request (doubles per failure).
        retry_backoff_max_ms: backoff cap.
        retry_backoff_jitter: relative jitter of the backoff (0.2 means +/-20 %).
        default_heartbeat_interval_ms: interval used until the first response states one.
        user_commit_timeout_ms: how long retriable errors of a user commit are retried.
    """

    group_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    max_poll_interval_ms: int = 300_000
    server_assignor: str | None = None
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    retry_backoff_jitter: float = 0.2
    default_heartbeat_interval_ms: int = 5_000
    user_commit_timeout_ms: int = 60_000

    def __post_init__(self) -> None:
        if not self.group_id:
            raise MemberConfigError("group_id must be a non-empty string")
        for name in ("instance_id", "rack_id", "server_assignor"):
            value = getattr(self, name)
            if value is not None and not value:
                raise MemberConfigError(f"{name} must be None or a non-empty string")
        for name in (
            "rebalance_timeout_ms",
            "max_poll_interval_ms",
            "auto_commit_interval_ms",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "default_heartbeat_interval_ms",
            "user_commit_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise MemberConfigError(f"{name} must be positive")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise MemberConfigError("retry_backoff_max_ms must be >= retry_backoff_ms")
        if not 0.0 <= self.retry_backoff_jitter < 1.0:
            raise MemberConfigError("retry_backoff_jitter must be in [0, 1)")
