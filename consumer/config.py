"""The Consumer's configuration: confluent-kafka's dotted keys in, a frozen ``ConsumerConfig`` out.

``parse_config`` checks every key for type and range and splits the settings in two: what the group
member (our Python code) uses, as typed fields, and what the librdkafka data-plane consumer gets, as
``ConsumerConfig.data_plane``. The full key table, with owners and the points where we follow Java
rather than librdkafka, is ``docs/reference/configuration.md``.

The data plane is a ``confluent_kafka.Consumer`` in manual incremental-assign mode.
confluent-kafka refuses to build a Consumer without ``group.id`` ("group.id must be set"), so the
data plane gets the member's own ``group.id``: an experiment against librdkafka 2.16.0 and a Kafka
4.3 broker showed that a consumer that never subscribes sends only FindCoordinator for it (no
JoinGroup, Heartbeat,
ConsumerGroupHeartbeat, OffsetCommit or LeaveGroup), and OffsetFetch only when a partition is
assigned with ``OFFSET_INVALID``. The member therefore always assigns explicit (or logical
beginning/end) offsets. Using the real id keeps group ACLs valid for that FindCoordinator.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from consumer._config.spec import (
    CLASSIC_ONLY,
    KEY_ALIASES,
    KNOWN_KEYS,
    REFUSED,
    SPECS,
    KeySpec,
    Owner,
    accepted_keys,
)
from consumer._config.types import BrokerAddress, DataPlaneSettings, Secret
from consumer._config.values import (
    InvalidValue,
    check_instance_id,
    coerce,
    describe_allowed,
    show_value,
)

__all__ = [
    "BrokerAddress",
    "ConfigError",
    "ConsumerConfig",
    "DataPlaneSettings",
    "Secret",
    "SecurityConfig",
    "parse_config",
]

SecurityProtocol = Literal["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
OffsetReset = Literal["earliest", "latest", "error"]
IsolationLevel = Literal["read_committed", "read_uncommitted"]
AnyLogger = logging.Logger | logging.LoggerAdapter[logging.Logger]
Callback = Callable[..., object]

_DOCS = "docs/reference/configuration.md"


class ConfigError(ValueError):
    """A configuration key or value is not accepted. The message names the key, shows the given
    value (``'***'`` for secrets) and says what is allowed."""


@dataclass(frozen=True)
class SecurityConfig:
    """How to authenticate and encrypt; used by the member's connections and forwarded to the
    data plane. Passwords are ``Secret`` objects: call ``reveal()`` where they are needed."""

    protocol: SecurityProtocol = "plaintext"
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: Secret | None = None
    ssl_endpoint_identification_algorithm: Literal["https", "none"] = "https"
    enable_ssl_certificate_verification: bool = True
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None

    @property
    def uses_ssl(self) -> bool:
        """True for ``ssl`` and ``sasl_ssl``."""
        return self.protocol in ("ssl", "sasl_ssl")

    @property
    def uses_sasl(self) -> bool:
        """True for ``sasl_plaintext`` and ``sasl_ssl``."""
        return self.protocol in ("sasl_plaintext", "sasl_ssl")


@dataclass(frozen=True)
class ConsumerConfig:
    """The validated configuration. Field names are the dotted keys with ``_`` for ``.``.

    Build it with ``parse_config``; ``data_plane`` is the dict for the librdkafka consumer.
    """

    bootstrap_servers: tuple[BrokerAddress, ...]
    group_id: str
    data_plane: DataPlaneSettings
    group_protocol: Literal["consumer"] = "consumer"
    group_remote_assignor: str | None = None
    group_instance_id: str | None = None
    client_id: str = "kafka-group-member"
    client_rack: str | None = None
    max_poll_interval_ms: int = 300_000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    enable_auto_offset_store: bool = True
    auto_offset_reset: OffsetReset = "latest"
    isolation_level: IsolationLevel = "read_committed"
    socket_timeout_ms: int = 60_000
    socket_connection_setup_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    reconnect_backoff_ms: int = 100
    reconnect_backoff_max_ms: int = 10_000
    security: SecurityConfig = SecurityConfig()
    error_cb: Callback | None = None
    on_commit: Callback | None = None
    on_state_change: Callback | None = None
    stats_cb: Callback | None = None
    throttle_cb: Callback | None = None
    logger: AnyLogger | None = None

    @property
    def rebalance_timeout_ms(self) -> int:
        """``RebalanceTimeoutMs`` for the join heartbeat: ``max.poll.interval.ms``."""
        return self.max_poll_interval_ms


def parse_config(config: Mapping[str, object]) -> ConsumerConfig:
    """Check a ``confluent_kafka.Consumer`` config dict and return the typed configuration.

    Raises ``ConfigError`` for the first key that is unknown (naming close matches), refused
    (classic-only keys name their replacement) or out of type or range, and for a missing
    ``bootstrap.servers`` or ``group.id``.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"The configuration must be a dict of configuration keys, not {type(config).__name__}."
        )
    typed: dict[str, object] = {}  # canonical key -> checked value
    spelled: dict[str, str] = {}  # canonical key -> the key as the caller wrote it
    raw: dict[str, object] = {}  # canonical key -> the value as given
    for key, value in config.items():
        canonical = _canonical_key(key, value)
        spec = SPECS[canonical]
        checked = _check_value(spec, key, value)
        if canonical in typed and typed[canonical] != checked:
            raise ConfigError(
                f"'{key}' and '{spelled[canonical]}' name the same setting but were given "
                f"different values ({show_value(key, value)} and "
                f"{show_value(key, raw[canonical])}); give only one."
            )
        typed[canonical], spelled[canonical], raw[canonical] = checked, key, value
    for required in ("bootstrap.servers", "group.id"):
        if required not in typed:
            raise ConfigError(
                f"'{required}' is required: expected {describe_allowed(SPECS[required])}; "
                "it is missing from the configuration."
            )
    _check_combinations(typed)
    return _build(typed, raw)


def _canonical_key(key: object, value: object) -> str:
    if not isinstance(key, str):
        raise ConfigError(f"Configuration keys are strings; got {key!r} ({type(key).__name__}).")
    canonical = KEY_ALIASES.get(key, key)
    if canonical in SPECS:
        if canonical == "group.protocol" and str(value).strip().lower() == "classic":
            raise ConfigError(
                f"Invalid value {show_value(key, value)} for 'group.protocol': this SDK implements "
                "only the KIP-848 consumer protocol; expected 'consumer' (the default). Use "
                "confluent_kafka.Consumer for group.protocol=classic."
            )
        return canonical
    if key in CLASSIC_ONLY:
        raise ConfigError(
            f"'{key}' is a classic-protocol setting and is not supported with "
            f"group.protocol=consumer, the only protocol this SDK implements: "
            f"{CLASSIC_ONLY[key]}. Remove '{key}' from the configuration."
        )
    if key in REFUSED:
        raise ConfigError(f"'{key}' is not accepted: {REFUSED[key]}.")
    if key in KNOWN_KEYS:  # pragma: no cover - every known key is classified above
        raise ConfigError(f"'{key}' is not accepted by this consumer; see {_DOCS}.")
    matches = difflib.get_close_matches(key, accepted_keys(), n=3)
    if matches:
        hint = " or ".join(f"'{m}'" for m in matches)
        raise ConfigError(f"'{key}' is not a configuration key; did you mean {hint}?")
    raise ConfigError(f"'{key}' is not a configuration key; {_DOCS} lists the accepted keys.")


def _check_value(spec: KeySpec, key: str, value: object) -> object:
    try:
        checked = coerce(spec, value)
        if spec.name == "group.instance.id":
            checked = check_instance_id(cast(str, checked))
    except InvalidValue as exc:
        raise ConfigError(
            f"Invalid value {show_value(key, value)} for '{key}': expected {exc.allowed}."
        ) from None
    return checked


def _effective(typed: Mapping[str, object], key: str) -> int:
    return cast(int, typed.get(key, SPECS[key].default))


def _check_combinations(typed: Mapping[str, object]) -> None:
    """Checks across keys, where librdkafka would refuse the data plane or we could not connect."""
    if _effective(typed, "reconnect.backoff.max.ms") < _effective(typed, "reconnect.backoff.ms"):
        raise ConfigError(
            f"Invalid value {_effective(typed, 'reconnect.backoff.max.ms')} for "
            "'reconnect.backoff.max.ms': expected at least 'reconnect.backoff.ms' "
            f"({_effective(typed, 'reconnect.backoff.ms')})."
        )
    if "receive.message.max.bytes" in typed:
        floor = _effective(typed, "fetch.max.bytes") + 512
        if _effective(typed, "receive.message.max.bytes") < floor:
            raise ConfigError(
                f"Invalid value {typed['receive.message.max.bytes']} for "
                f"'receive.message.max.bytes': expected at least 'fetch.max.bytes' + 512 ({floor})."
            )
    if _effective(typed, "fetch.max.bytes") < _effective(typed, "message.max.bytes"):
        raise ConfigError(
            f"Invalid value {_effective(typed, 'fetch.max.bytes')} for 'fetch.max.bytes': "
            f"expected at least 'message.max.bytes' ({_effective(typed, 'message.max.bytes')})."
        )
    protocol = typed.get("security.protocol", "plaintext")
    if protocol in ("sasl_plaintext", "sasl_ssl"):
        for needed in ("sasl.mechanism", "sasl.username", "sasl.password"):
            if needed not in typed:
                extra = (
                    "; librdkafka's default mechanism GSSAPI is not implemented by the member"
                    if needed == "sasl.mechanism"
                    else ""
                )
                raise ConfigError(
                    f"'{needed}' is required with security.protocol={protocol}: expected "
                    f"{describe_allowed(SPECS[needed])}{extra}."
                )


def _build(typed: Mapping[str, object], raw: Mapping[str, object]) -> ConsumerConfig:
    def get(key: str) -> object:
        return typed.get(key, SPECS[key].default)

    def secret(key: str) -> Secret | None:
        value = typed.get(key)
        return None if value is None else Secret(cast(str, value))

    security = SecurityConfig(
        protocol=cast(SecurityProtocol, get("security.protocol")),
        ssl_ca_location=cast("str | None", get("ssl.ca.location")),
        ssl_certificate_location=cast("str | None", get("ssl.certificate.location")),
        ssl_key_location=cast("str | None", get("ssl.key.location")),
        ssl_key_password=secret("ssl.key.password"),
        ssl_endpoint_identification_algorithm=cast(
            Literal["https", "none"], get("ssl.endpoint.identification.algorithm")
        ),
        enable_ssl_certificate_verification=cast(bool, get("enable.ssl.certificate.verification")),
        sasl_mechanism=cast("SaslMechanism | None", get("sasl.mechanism")),
        sasl_username=cast("str | None", get("sasl.username")),
        sasl_password=secret("sasl.password"),
    )
    return ConsumerConfig(
        bootstrap_servers=cast("tuple[BrokerAddress, ...]", get("bootstrap.servers")),
        group_id=cast(str, get("group.id")),
        data_plane=_data_plane(typed, raw),
        group_remote_assignor=cast("str | None", get("group.remote.assignor")),
        group_instance_id=cast("str | None", get("group.instance.id")),
        client_id=cast(str, get("client.id")),
        client_rack=cast("str | None", get("client.rack")),
        max_poll_interval_ms=cast(int, get("max.poll.interval.ms")),
        enable_auto_commit=cast(bool, get("enable.auto.commit")),
        auto_commit_interval_ms=cast(int, get("auto.commit.interval.ms")),
        enable_auto_offset_store=cast(bool, get("enable.auto.offset.store")),
        auto_offset_reset=cast(OffsetReset, get("auto.offset.reset")),
        isolation_level=cast(IsolationLevel, get("isolation.level")),
        socket_timeout_ms=cast(int, get("socket.timeout.ms")),
        socket_connection_setup_timeout_ms=cast(int, get("socket.connection.setup.timeout.ms")),
        retry_backoff_ms=cast(int, get("retry.backoff.ms")),
        retry_backoff_max_ms=cast(int, get("retry.backoff.max.ms")),
        reconnect_backoff_ms=cast(int, get("reconnect.backoff.ms")),
        reconnect_backoff_max_ms=cast(int, get("reconnect.backoff.max.ms")),
        security=security,
        error_cb=cast("Callback | None", get("error_cb")),
        on_commit=cast("Callback | None", get("on_commit")),
        on_state_change=cast("Callback | None", get("on_state_change")),
        stats_cb=cast("Callback | None", get("stats_cb")),
        throttle_cb=cast("Callback | None", get("throttle_cb")),
        logger=cast("AnyLogger | None", get("logger")),
    )


def _data_plane(typed: Mapping[str, object], raw: Mapping[str, object]) -> DataPlaneSettings:
    """Keys shared with the member, in their checked form; data-plane keys as given; then the
    settings that keep the data plane out of group management."""
    settings: dict[str, object] = {}
    for name, spec in SPECS.items():
        if spec.owner is Owner.BOTH:
            value = typed.get(name, spec.default)
            if name == "bootstrap.servers":
                value = ",".join(str(a) for a in cast("tuple[BrokerAddress, ...]", value))
            if value is not None:
                settings[name] = value
        elif spec.owner is Owner.DATA_PLANE and name in typed:
            settings[name] = raw[name]
    settings["group.id"] = typed["group.id"]
    settings["enable.auto.commit"] = False
    settings["enable.auto.offset.store"] = False
    return DataPlaneSettings(settings)
