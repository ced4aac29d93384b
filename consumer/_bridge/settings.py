"""How the background loop reaches the cluster (derived by the client from its configuration)."""

from __future__ import annotations

from dataclasses import dataclass

from consumer._config.spec import spec_default
from consumer._logging import AnyLogger
from consumer.config import SecurityConfig

__all__ = ["ClusterSettings"]


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """How the runtime reaches the cluster, and where it logs (defaults: the key table's)."""

    bootstrap_servers: str
    client_id: str
    connect_timeout_ms: int = spec_default("socket.connection.setup.timeout.ms", int)
    request_timeout_ms: int = spec_default("socket.timeout.ms", int)
    security: SecurityConfig | None = None  # TLS/SASL of the member's connections
    reconnect_backoff_ms: int = spec_default("reconnect.backoff.ms", int)
    reconnect_backoff_max_ms: int = spec_default("reconnect.backoff.max.ms", int)
    logger: AnyLogger | None = None  # the ``logger`` key: None = the module loggers
