"""How the background loop reaches the cluster (derived by the client from its configuration)."""

from __future__ import annotations

from dataclasses import dataclass

from consumer.config import SecurityConfig

__all__ = ["ClusterSettings"]


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """How the runtime reaches the cluster."""

    bootstrap_servers: str
    client_id: str
    connect_timeout_ms: int = 10_000
    request_timeout_ms: int = 30_000
    security: SecurityConfig | None = None  # TLS/SASL of the member's connections
