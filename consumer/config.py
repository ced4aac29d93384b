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
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, cast

from confluent_kafka import KafkaError

from consumer._config.spec import (
    CLASSIC_ONLY,
    KEY_ALIASES,
    KNOWN_KEYS,
    REFUSED,
    SPECS,
    KeySpec,
    Owner,
    is_secret_key,
    spec_default,
)
from consumer._config.types import BrokerAddress, DataPlaneSettings, Secret
from consumer._config.values import (
    InvalidValue,
    check_instance_id,
    coerce,
    describe_allowed,
    show_value,
)
from consumer._logging import AnyLogger
from consumer.errors import ConsumerError

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
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
OffsetReset = Literal["earliest", "latest", "error"]
IsolationLevel = Literal["read_committed", "read_uncommitted"]
EndpointIdentification = Literal["https", "none"]
Callback = Callable[..., object]

_DOCS = "docs/reference/configuration.md"
#: Dataclass field name -> configuration key (``SecurityConfig.protocol`` is the one exception).
_FIELD_KEYS: dict[str, str] = {key.replace(".", "_"): key for key in SPECS} | {
    "protocol": "security.protocol"
}


class ConfigError(ConsumerError, ValueError):
    """A configuration key or value is not accepted. The message names the key, shows the given
    value (``'***'`` for secrets) and says what is allowed.

    As confluent-kafka's constructor errors are, a ``confluent_kafka.KafkaException`` whose
    ``args[0].code()`` is ``KafkaError._INVALID_ARG`` (through
    :class:`~consumer.errors.ConsumerError`, the root of this package's exceptions); also a
    ``ValueError``, which confluent-kafka raises for a missing ``group.id``.
    """

    kafka_code = KafkaError._INVALID_ARG


@dataclass(frozen=True)
class SecurityConfig:
    """How to authenticate and encrypt; used by the member's connections and forwarded to the
    data plane. Passwords are ``Secret`` objects: call ``reveal()`` where they are needed.

    Field names are the dotted keys with ``_`` for ``.`` (``protocol`` is ``security.protocol``);
    the defaults are the key table's (``consumer._config.spec``).
    """

    protocol: SecurityProtocol = cast(SecurityProtocol, spec_default("security.protocol", str))
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: Secret | None = None
    ssl_endpoint_identification_algorithm: EndpointIdentification = cast(
        EndpointIdentification, spec_default("ssl.endpoint.identification.algorithm", str)
    )
    enable_ssl_certificate_verification: bool = spec_default(
        "enable.ssl.certificate.verification", bool
    )
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    oauth_cb: Callback | None = None
    sasl_oauthbearer_method: Literal["default", "oidc"] | None = None
    sasl_oauthbearer_config: Secret | None = None
    enable_sasl_oauthbearer_unsecure_jwt: bool | None = None
    sasl_oauthbearer_client_id: str | None = None
    sasl_oauthbearer_client_secret: Secret | None = None
    sasl_oauthbearer_token_endpoint_url: str | None = None
    sasl_oauthbearer_scope: str | None = None
    sasl_oauthbearer_extensions: str | None = None
    sasl_oauthbearer_sub_claim_name: str | None = None
    https_ca_location: str | None = None

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

    Build it with ``parse_config``; ``data_plane`` is the dict for the librdkafka consumer. The
    defaults are the key table's (``consumer._config.spec``), read from it, never repeated.
    """

    bootstrap_servers: tuple[BrokerAddress, ...]
    group_id: str
    data_plane: DataPlaneSettings
    group_protocol: Literal["consumer", "classic"] = cast(
        Literal["consumer", "classic"], spec_default("group.protocol", str)
    )
    group_remote_assignor: str | None = None
    group_instance_id: str | None = None
    client_id: str = spec_default("client.id", str)
    client_rack: str | None = None
    max_poll_interval_ms: int = spec_default("max.poll.interval.ms", int)
    enable_auto_commit: bool = spec_default("enable.auto.commit", bool)
    auto_commit_interval_ms: int = spec_default("auto.commit.interval.ms", int)
    enable_auto_offset_store: bool = spec_default("enable.auto.offset.store", bool)
    auto_offset_reset: OffsetReset = cast(OffsetReset, spec_default("auto.offset.reset", str))
    isolation_level: IsolationLevel = cast(IsolationLevel, spec_default("isolation.level", str))
    socket_timeout_ms: int = spec_default("socket.timeout.ms", int)
    socket_connection_setup_timeout_ms: int = spec_default(
        "socket.connection.setup.timeout.ms", int
    )
    retry_backoff_ms: int = spec_default("retry.backoff.ms", int)
    retry_backoff_max_ms: int = spec_default("retry.backoff.max.ms", int)
    reconnect_backoff_ms: int = spec_default("reconnect.backoff.ms", int)
    reconnect_backoff_max_ms: int = spec_default("reconnect.backoff.max.ms", int)
    security: SecurityConfig = SecurityConfig()
    error_cb: Callback | None = None
    on_commit: Callback | None = None
    on_state_change: Callback | None = None
    stats_cb: Callback | None = None
    throttle_cb: Callback | None = None
    logger: AnyLogger | None = None
    #: Classic-only keys given without ``group.protocol`` and ignored (see ``parse_config``).
    ignored_classic_keys: tuple[str, ...] = ()

    @property
    def rebalance_timeout_ms(self) -> int:
        """``RebalanceTimeoutMs`` for the join heartbeat: ``max.poll.interval.ms``."""
        return self.max_poll_interval_ms


def parse_config(config: Mapping[str, object]) -> ConsumerConfig:
    """Check a ``confluent_kafka.Consumer`` config dict and return the typed configuration.

    Raises ``ConfigError`` for the first key that is unknown (naming close matches), refused
    (classic-only keys name their replacement) or out of type or range, and for a missing
    ``bootstrap.servers`` or ``group.id``.

    Example:
        >>> base = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "orders"}
        >>> config = parse_config({**base, "auto.commit.interval.ms": 1000})
        >>> config.group_id, config.auto_commit_interval_ms
        ('orders', 1000)
        >>> parse_config({**base, "group.protocol": "consumer", "session.timeout.ms": 10})
        Traceback (most recent call last):
        ...
        consumer.config.ConfigError: 'session.timeout.ms' is a classic-protocol setting ...
        >>> parse_config({**base, "session.timeout.ms": 10}).ignored_classic_keys
        ('session.timeout.ms',)
    """
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"The configuration must be a dict of configuration keys, not {type(config).__name__}."
        )
    typed: dict[str, object] = {}  # canonical key -> checked value
    spelled: dict[str, str] = {}  # canonical key -> the key as the caller wrote it
    raw: dict[str, object] = {}  # canonical key -> the value as given
    classic_only: dict[str, object] = {}  # checked once the protocol is known
    for key, value in config.items():
        canonical = _canonical_key(key)
        if canonical in CLASSIC_ONLY:
            classic_only[canonical] = value
            continue
        spec = SPECS[canonical]
        checked = _check_value(spec, key, value)
        if canonical in typed and typed[canonical] != checked:
            raise ConfigError(
                f"'{key}' and '{spelled[canonical]}' name the same setting but were given "
                f"different values ({show_value(key, value)} and "
                f"{show_value(key, raw[canonical])}); give only one."
            )
        typed[canonical], spelled[canonical], raw[canonical] = checked, key, value
    ignored_classic_keys = _check_protocol_keys(typed, classic_only)
    for key, value in classic_only.items():
        checked = _check_value(SPECS[key], key, value)
        if key not in ignored_classic_keys:
            typed[key], spelled[key], raw[key] = checked, key, value
    for required in ("bootstrap.servers", "group.id"):
        if required not in typed:
            raise ConfigError(
                f"'{required}' is required: expected {describe_allowed(SPECS[required])}; "
                "it is missing from the configuration."
            )
    _check_combinations(typed)
    return replace(_build(typed, raw), ignored_classic_keys=ignored_classic_keys)


def _canonical_key(key: object) -> str:
    if not isinstance(key, str):
        raise ConfigError(f"Configuration keys are strings; got {key!r} ({type(key).__name__}).")
    canonical = KEY_ALIASES.get(key, key)
    if canonical in SPECS:
        return canonical
    if key in REFUSED:
        raise ConfigError(f"'{key}' is not accepted: {REFUSED[key]}.")
    if key in KNOWN_KEYS:  # pragma: no cover - every known key is classified above
        raise ConfigError(f"'{key}' is not accepted by this consumer; see {_DOCS}.")
    # Suggest from every key librdkafka knows, refused ones too: the message of the suggested key
    # then says why it is refused, rather than the user hunting for a key that is not there.
    matches = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=3)
    if matches:
        hint = " or ".join(f"'{m}'" for m in matches)
        raise ConfigError(f"'{key}' is not a configuration key; did you mean {hint}?")
    raise ConfigError(f"'{key}' is not a configuration key; {_DOCS} lists the accepted keys.")


def wants_classic(config: object) -> bool:
    """Whether a configuration dict asks for ``group.protocol=classic`` (any case); nothing else is
    checked here (``parse_config`` checks everything)."""
    if not isinstance(config, Mapping):
        return False
    value = config.get("group.protocol")
    return isinstance(value, str) and value.strip().lower() == "classic"


def _check_protocol_keys(
    typed: Mapping[str, object], classic_only: Mapping[str, object]
) -> tuple[str, ...]:
    """Keys of one protocol given with the other: classic-only keys under an explicit
    ``group.protocol=consumer`` (refused whatever their value, as librdkafka and Java refuse
    them), our member's state callback under ``classic``.

    Returns the classic-only keys to ignore: those given while ``group.protocol`` is not set. Our
    default protocol is ``consumer`` where librdkafka's is ``classic``, so a program written for
    confluent-kafka that tunes its classic session (``session.timeout.ms`` in confluent-kafka's
    own example consumer) still runs when only its import changes; the consumer logs a warning
    naming each ignored key (``log_ignored_classic_keys``).
    """
    if typed.get("group.protocol", SPECS["group.protocol"].default) == "classic":
        if "on_state_change" in typed:
            raise ConfigError(
                "'on_state_change' is not supported with group.protocol=classic: it reports the "
                "states of the consumer-protocol member, and librdkafka's classic consumer does "
                "not report its own. Remove 'on_state_change' or use group.protocol=consumer."
            )
        return ()
    if "group.protocol" not in typed:
        return tuple(classic_only)
    for key in classic_only:
        raise ConfigError(
            f"'{key}' is a classic-protocol setting and is not supported with "
            f"group.protocol=consumer: {CLASSIC_ONLY[key]}. Remove '{key}' from the "
            "configuration, or set group.protocol=classic."
        )
    return ()


def log_ignored_classic_keys(config: ConsumerConfig) -> None:
    """Log one warning per classic-only key ``parse_config`` ignored because ``group.protocol``
    was not set (``ConsumerConfig.ignored_classic_keys``), to the ``logger`` key's logger or the
    ``consumer`` logger."""
    logger = config.logger or logging.getLogger("consumer")
    for key in config.ignored_classic_keys:
        logger.warning(
            "'%s' is a classic-protocol setting and is ignored: without 'group.protocol' this "
            "consumer uses the consumer group protocol (KIP-848), where %s. Set "
            "group.protocol=classic to use '%s', or group.protocol=consumer to have it refused.",
            key,
            CLASSIC_ONLY[key],
            key,
        )


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
    if "session.timeout.ms" in typed:  # classic only; unset, librdkafka checks its default
        session_timeout_ms = _effective(typed, "session.timeout.ms")
        if _effective(typed, "max.poll.interval.ms") < session_timeout_ms:
            raise ConfigError(
                f"Invalid value {_effective(typed, 'max.poll.interval.ms')} for "
                "'max.poll.interval.ms': expected at least 'session.timeout.ms' "
                f"({session_timeout_ms}) with group.protocol=classic."
            )
    protocol = typed.get("security.protocol", SPECS["security.protocol"].default)
    if protocol in ("sasl_plaintext", "sasl_ssl"):
        _check_sasl(typed, str(protocol))


def _check_sasl(typed: Mapping[str, object], protocol: str) -> None:
    """The keys each SASL mechanism needs (librdkafka's rules, with its wording of the choice)."""
    mechanism = typed.get("sasl.mechanism")
    if mechanism is None:
        raise ConfigError(
            f"'sasl.mechanism' is required with security.protocol={protocol}: expected "
            f"{describe_allowed(SPECS['sasl.mechanism'])}; librdkafka's default mechanism GSSAPI "
            "is not implemented by the member."
        )
    if mechanism != "OAUTHBEARER":
        needed_keys: tuple[str, ...] = ("sasl.username", "sasl.password")
    elif "oauth_cb" in typed:
        needed_keys = ()
    elif typed.get("sasl.oauthbearer.method") == "oidc":
        if typed.get("enable.sasl.oauthbearer.unsecure.jwt"):
            raise ConfigError(
                "'enable.sasl.oauthbearer.unsecure.jwt' and 'sasl.oauthbearer.method=oidc' are "
                "mutually exclusive."
            )
        needed_keys = (
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.token.endpoint.url",
        )
    elif typed.get("enable.sasl.oauthbearer.unsecure.jwt"):
        needed_keys = ("sasl.oauthbearer.config",)
    else:
        raise ConfigError(
            "sasl.mechanism=OAUTHBEARER needs a token source: set 'oauth_cb', "
            "'sasl.oauthbearer.method' to 'oidc' (with 'sasl.oauthbearer.client.id', "
            "'sasl.oauthbearer.client.secret' and 'sasl.oauthbearer.token.endpoint.url'), or "
            "'enable.sasl.oauthbearer.unsecure.jwt' to true (development only)."
        )
    for needed in needed_keys:
        if not typed.get(needed):
            raise ConfigError(
                f"'{needed}' is required with security.protocol={protocol} and "
                f"sasl.mechanism={mechanism}: expected {describe_allowed(SPECS[needed])}."
            )


def _build(typed: Mapping[str, object], raw: Mapping[str, object]) -> ConsumerConfig:
    """The dataclasses from the checked values; a field takes its key's value or its default."""

    def value(field_name: str) -> Any:
        key = _FIELD_KEYS[field_name]
        checked = typed.get(key, SPECS[key].default)
        return Secret(cast(str, checked)) if checked is not None and is_secret_key(key) else checked

    security = SecurityConfig(**{f.name: value(f.name) for f in fields(SecurityConfig)})
    settings = {f.name: value(f.name) for f in fields(ConsumerConfig) if f.name in _FIELD_KEYS}
    return ConsumerConfig(data_plane=_data_plane(typed, raw), security=security, **settings)


def _data_plane(typed: Mapping[str, object], raw: Mapping[str, object]) -> DataPlaneSettings:
    """Keys shared with the member, in their checked form; data-plane keys as given; then the
    settings that keep the data plane out of group management.

    Under ``group.protocol=classic`` the librdkafka consumer is the group member too: it gets
    every given key (the member's in their checked form) and manages the group itself.
    """
    classic = typed.get("group.protocol") == "classic"
    settings: dict[str, object] = {}
    for name, spec in SPECS.items():
        if spec.owner is Owner.CLASSIC or (classic and spec.owner is Owner.MEMBER):
            if name in typed:
                settings[name] = typed[name]
        elif spec.owner is Owner.BOTH:
            value = typed.get(name, spec.default)
            if name == "bootstrap.servers":
                value = ",".join(str(a) for a in cast("tuple[BrokerAddress, ...]", value))
            if value is not None:
                settings[name] = value
        elif spec.owner is Owner.DATA_PLANE and name in typed:
            settings[name] = raw[name]
    if classic:
        return DataPlaneSettings(settings)
    settings["group.id"] = typed["group.id"]
    settings["enable.auto.commit"] = False
    settings["enable.auto.offset.store"] = False
    return DataPlaneSettings(settings)
