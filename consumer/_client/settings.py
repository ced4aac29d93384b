"""Pure translations of what the application passed into what the member and runtime take.

``subscription_event`` checks ``subscribe()``'s arguments and builds the member's input;
``member_config`` and ``cluster_settings`` derive the background runtime's settings from the
parsed configuration. No I/O, so each rule is unit-testable on its own.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Sequence
from typing import Any

from consumer._bridge.settings import ClusterSettings
from consumer._config.types import Secret
from consumer._logging import AnyLogger, WithoutDebugRecords
from consumer.config import ConsumerConfig
from consumer.member import MemberConfig, Subscribed

__all__ = [
    "check_callbacks",
    "cluster_settings",
    "member_config",
    "subscription_event",
    "with_sasl_user",
]

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def subscription_event(topics: Any) -> Subscribed:
    """The member input for ``subscribe(topics)``; a name starting with ``^`` is a RE2J regex.

    As librdkafka: several regexes are OR-ed, and plain names join them as literal alternatives.
    """
    if isinstance(topics, str) or not isinstance(topics, Sequence) or not topics:
        raise TypeError("subscribe() takes a non-empty list of topic names or ^regexes")
    names, patterns = [], []
    for topic in topics:
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic names must be non-empty strings, got {topic!r}")
        if topic.startswith("^"):
            patterns.append(topic)
        elif _TOPIC_NAME.fullmatch(topic) is None:
            raise ValueError(
                f"invalid topic name {topic!r}: use 1-249 characters of [a-zA-Z0-9._-], "
                "or start it with ^ to subscribe by regex"
            )
        else:
            names.append(topic)
    if patterns:
        alternatives = [f"({p})" for p in patterns] + [re.escape(n) for n in names]
        return Subscribed(topic_regex="|".join(alternatives))
    return Subscribed(topic_names=tuple(sorted(set(names))))


def check_callbacks(**callbacks: object) -> None:
    """Refuse a rebalance callback that is neither ``None`` nor callable, naming it."""
    for name, callback in callbacks.items():
        if callback is not None and not callable(callback):
            raise TypeError(f"{name} must be callable, got {callback!r}")
        if inspect.iscoroutinefunction(callback):
            raise TypeError(f"{name} is an async function: use consumer.aio.AsyncConsumer")


def member_config(cfg: ConsumerConfig) -> MemberConfig:
    """The member core's settings from the consumer configuration."""
    return MemberConfig(
        group_id=cfg.group_id,
        instance_id=cfg.group_instance_id,
        rack_id=cfg.client_rack,
        rebalance_timeout_ms=cfg.rebalance_timeout_ms,
        max_poll_interval_ms=cfg.max_poll_interval_ms,
        server_assignor=cfg.group_remote_assignor,
        auto_commit=cfg.enable_auto_commit,
        auto_commit_interval_ms=max(1, cfg.auto_commit_interval_ms),
        retry_backoff_ms=cfg.retry_backoff_ms,
        retry_backoff_max_ms=max(cfg.retry_backoff_ms, cfg.retry_backoff_max_ms),
        auto_offset_reset=cfg.auto_offset_reset,
        isolation_level=cfg.isolation_level,
    )


def cluster_settings(cfg: ConsumerConfig) -> ClusterSettings:
    """How the background runtime reaches the cluster and where it logs, from the consumer
    configuration."""
    return ClusterSettings(
        bootstrap_servers=",".join(str(address) for address in cfg.bootstrap_servers),
        client_id=cfg.client_id,
        connect_timeout_ms=cfg.socket_connection_setup_timeout_ms,
        request_timeout_ms=cfg.socket_timeout_ms,
        security=cfg.security,
        reconnect_backoff_ms=cfg.reconnect_backoff_ms,
        reconnect_backoff_max_ms=cfg.reconnect_backoff_max_ms,
        logger=_member_logger(cfg),
    )


def _member_logger(cfg: ConsumerConfig) -> AnyLogger | None:
    """Where the member's own records go: the ``logger`` key's logger, for DEBUG records only
    when librdkafka's ``debug`` key is set too (as librdkafka does with its debug records)."""
    if cfg.logger is None or "debug" in cfg.data_plane:
        return cfg.logger
    return WithoutDebugRecords(cfg.logger)


_PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def with_sasl_user(cfg: ConsumerConfig, username: str, password: str) -> ConsumerConfig:
    """``cfg`` with a new SASL user name and password (``set_sasl_credentials()``).

    Raises:
        TypeError: a value is not a string.
        ValueError: the consumer does not authenticate with a password (``security.protocol``
            sasl_plaintext or sasl_ssl, ``sasl.mechanism`` PLAIN or SCRAM).
    """
    given: tuple[tuple[str, object], ...] = (("username", username), ("password", password))
    for name, value in given:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    security = cfg.security
    mechanism = (security.sasl_mechanism or "").upper()
    if not security.uses_sasl or mechanism not in _PASSWORD_MECHANISMS:
        raise ValueError(
            "set_sasl_credentials() needs security.protocol sasl_plaintext or sasl_ssl with "
            f"sasl.mechanism {', '.join(_PASSWORD_MECHANISMS)}; got security.protocol "
            f"{security.protocol!r} and sasl.mechanism {security.sasl_mechanism!r}"
        )
    new_security = dataclasses.replace(
        security, sasl_username=username, sasl_password=Secret(password)
    )
    return dataclasses.replace(cfg, security=new_security)
