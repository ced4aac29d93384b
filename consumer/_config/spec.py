"""The configuration key table: every key the Consumer accepts, and every key it refuses.

Ranges, defaults and enum values are librdkafka's (``rd_kafka_conf_properties_show`` of librdkafka
2.16.0, the one bundled with confluent-kafka 2.16.1) unless a note says otherwise. The table is
data: ``consumer.config.parse_config`` walks it, the tests iterate it, and
``docs/reference/configuration.md`` embeds the table rendered by ``consumer._config.doc``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar


class Kind(enum.Enum):
    """How a value is checked and coerced."""

    INT = "integer"
    BOOL = "boolean"
    ENUM = "enum"
    STRING = "string"
    CSV_FLAGS = "CSV flags"
    BROKER_LIST = "host:port list"
    CALLABLE = "callable"
    LOGGER = "logging.Logger"


class Owner(enum.Enum):
    """Who uses a key: the group member (our Python code), the librdkafka data plane, or both;
    ``CLASSIC`` keys are librdkafka's classic-protocol consumer's only (``group.protocol=classic``).
    """

    MEMBER = "member"
    DATA_PLANE = "data plane"
    BOTH = "both"
    CLASSIC = "classic consumer"


@dataclass(frozen=True)
class KeySpec:
    """One accepted configuration key.

    ``choices`` lists the canonical enum (or CSV flag) values; ``synonyms`` maps accepted
    spellings (lower case) to a canonical value, as librdkafka does for ``auto.offset.reset``.
    """

    name: str
    kind: Kind
    owner: Owner
    default: object = None
    min_value: int | None = None
    max_value: int | None = None
    choices: tuple[str, ...] = ()
    synonyms: tuple[tuple[str, str], ...] = ()
    note: str = ""


def _int(name: str, owner: Owner, lo: int, hi: int, default: int | None, note: str = "") -> KeySpec:
    return KeySpec(name, Kind.INT, owner, default, lo, hi, note=note)


def _bool(name: str, owner: Owner, default: bool | None, note: str = "") -> KeySpec:
    return KeySpec(name, Kind.BOOL, owner, default, note=note)


def _str(name: str, owner: Owner, default: str | None = None, note: str = "") -> KeySpec:
    return KeySpec(name, Kind.STRING, owner, default, note=note)


def _enum(
    name: str,
    owner: Owner,
    choices: tuple[str, ...],
    default: str | None,
    synonyms: tuple[tuple[str, str], ...] = (),
    note: str = "",
) -> KeySpec:
    return KeySpec(name, Kind.ENUM, owner, default, choices=choices, synonyms=synonyms, note=note)


def _cb(name: str, owner: Owner, note: str) -> KeySpec:
    return KeySpec(name, Kind.CALLABLE, owner, note=note)


M, D, B = Owner.MEMBER, Owner.DATA_PLANE, Owner.BOTH
INT32_MAX = 2_147_483_647
DEFAULT_CLIENT_ID = "kafka-group-member"

DEBUG_FLAGS = (
    "generic", "broker", "topic", "metadata", "feature", "queue", "msg", "protocol", "cgrp",
    "security", "fetch", "interceptor", "plugin", "consumer", "admin", "eos", "mock", "assignor",
    "conf", "telemetry", "all",
)  # fmt: skip
ASSIGNMENT_STRATEGIES = ("range", "roundrobin", "cooperative-sticky")
BUILTIN_FEATURES = (
    "gzip", "snappy", "ssl", "sasl", "regex", "lz4", "sasl_gssapi", "sasl_plain", "sasl_scram",
    "plugins", "zstd", "sasl_oauthbearer", "http", "oidc",
)  # fmt: skip

_MEMBER_SPECS: tuple[KeySpec, ...] = (
    KeySpec("bootstrap.servers", Kind.BROKER_LIST, B, note="Required. `metadata.broker.list` is an alias. A missing port means 9092, as in librdkafka."),  # noqa: E501
    _str("group.id", M, note="Required, non-empty. The data plane gets the same id but never joins or commits with it; it fetches committed offsets only for manually assigned partitions given without an offset."),  # noqa: E501
    _enum("group.protocol", M, ("consumer", "classic"), "consumer", note="`consumer`: our KIP-848 member. `classic`: librdkafka's classic-protocol consumer behind the same API (see `docs/howto/switching-protocol.md`). librdkafka's default is `classic`."),  # noqa: E501
    _str("group.remote.assignor", M, note="Server-side assignor (`uniform`, `range`); unset = broker default. Accepted and ignored under `classic`, as librdkafka does."),  # noqa: E501
    _str("group.instance.id", M, note="Static membership. At most 249 characters of `[a-zA-Z0-9._-]`, as Java checks."),  # noqa: E501
    _str("client.id", B, DEFAULT_CLIENT_ID, note="librdkafka's default is `rdkafka`."),
    _str("client.rack", B, note="Sent as RackId; the data plane uses it for fetch-from-follower."),
    _int("max.poll.interval.ms", M, 1, 86_400_000, 300_000, "Also the rebalance timeout sent on join (as Java and librdkafka)."),  # noqa: E501
    _bool("enable.auto.commit", M, True, "Commits are ours, made with the member epoch; the data plane always gets `false`."),  # noqa: E501
    _int("auto.commit.interval.ms", M, 0, 86_400_000, 5000),
    _bool("enable.auto.offset.store", M, True, "The data plane always gets `false`."),
    _enum(
        "auto.offset.reset", B, ("earliest", "latest", "error"), "latest",
        synonyms=(("smallest", "earliest"), ("beginning", "earliest"), ("largest", "latest"), ("end", "latest")),  # noqa: E501
        note="`smallest`/`beginning` become `earliest`, `largest`/`end` become `latest`, as in librdkafka.",  # noqa: E501
    ),  # fmt: skip
    _enum("isolation.level", B, ("read_committed", "read_uncommitted"), "read_committed", note="librdkafka's default (Java's is `read_uncommitted`)."),  # noqa: E501
    _int("socket.timeout.ms", B, 10, 300_000, 60_000, "Also the timeout of each control-plane request."),  # noqa: E501
    _int("socket.connection.setup.timeout.ms", B, 1000, INT32_MAX, 30_000),
    _int("retry.backoff.ms", B, 1, 300_000, 100),
    _int("retry.backoff.max.ms", B, 1, 300_000, 1000, "Below `retry.backoff.ms` it caps the backoff at itself (librdkafka warns, Java is silent)."),  # noqa: E501
    _int("reconnect.backoff.ms", B, 0, 3_600_000, 100, "The member waits up to this (with jitter), doubling per failed attempt, between its attempts to connect to a broker."),  # noqa: E501
    _int("reconnect.backoff.max.ms", B, 0, 3_600_000, 10_000, "Caps that wait. Must be >= `reconnect.backoff.ms` (librdkafka refuses otherwise)."),  # noqa: E501
    _enum("security.protocol", B, ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"), "plaintext"),
    _str("ssl.ca.location", B),
    _str("ssl.certificate.location", B),
    _str("ssl.key.location", B),
    _str("ssl.key.password", B, note="Secret: shown as `***`."),
    _enum("ssl.endpoint.identification.algorithm", B, ("https", "none"), "https"),
    _bool("enable.ssl.certificate.verification", B, True),
    _enum("sasl.mechanism", B, ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"), None, note="`sasl.mechanisms` is an alias. Required with `sasl_*`; GSSAPI is not implemented by the member."),  # noqa: E501
    _str("sasl.username", B, note="Required with `sasl_*` and PLAIN or SCRAM."),
    _str("sasl.password", B, note="Required with `sasl_*` and PLAIN or SCRAM. Secret: shown as `***`."),  # noqa: E501
    _cb("oauth_cb", B, "OAUTHBEARER: `oauth_cb(sasl.oauthbearer.config)` returns `(token, expiry_seconds_since_epoch[, principal, extensions])`. The data plane calls it from `poll()`, the member from a worker thread of its background loop."),  # noqa: E501
    _enum("sasl.oauthbearer.method", B, ("default", "oidc"), None, note="Unset means `default` (`oauth_cb` or unsecured JWTs). `oidc`: client credentials against `sasl.oauthbearer.token.endpoint.url` (both planes fetch their own tokens)."),  # noqa: E501
    _str("sasl.oauthbearer.config", B, note="Passed to `oauth_cb`; with `enable.sasl.oauthbearer.unsecure.jwt`: `principal=... lifeSeconds=... scope=...`. Secret: shown as `***`."),  # noqa: E501
    _bool("enable.sasl.oauthbearer.unsecure.jwt", B, None, "Unset means false. Unsigned tokens for brokers with the unsecured validator (development only)."),  # noqa: E501
    _str("sasl.oauthbearer.client.id", B, note="OIDC client id. `sasl.oauthbearer.client.credentials.client.id` is an alias."),  # noqa: E501
    _str("sasl.oauthbearer.client.secret", B, note="OIDC client secret. `sasl.oauthbearer.client.credentials.client.secret` is an alias. Secret: shown as `***`."),  # noqa: E501
    _str("sasl.oauthbearer.token.endpoint.url", B, note="OIDC token endpoint (http or https)."),
    _str("sasl.oauthbearer.scope", B, note="OIDC scope (optional)."),
    _str("sasl.oauthbearer.extensions", B, note="SASL extensions sent with the token: `name=value,name=value`."),  # noqa: E501
    _str("sasl.oauthbearer.sub.claim.name", B, note="The claim of an OIDC token naming the principal; unset means `sub`."),  # noqa: E501
    _str("https.ca.location", B, note="CA certificates (file or directory) to verify an https token endpoint; unset: the system's."),  # noqa: E501
    _cb("error_cb", B, "Called with a `KafkaError` for member and data-plane errors."),
    KeySpec("logger", Kind.LOGGER, B, note="A `logging.Logger` (or `LoggerAdapter`) for member and data-plane logs: the member's own records (background loop, connections, retries, unreported group errors) go to it instead of the `consumer.*` loggers; their DEBUG records only when `debug` is set, as librdkafka sends its debug records only for the contexts named in `debug`."),  # noqa: E501
    _cb("on_commit", M, "`on_commit(err, partitions)` after each commit, as in confluent-kafka."),
    _cb("on_state_change", M, "Extra (not in confluent-kafka): `on_state_change(previous, current)` with member state names. Refused under `classic` (librdkafka does not report its states)."),  # noqa: E501
)  # fmt: skip

_CLASSIC = "Only with `group.protocol=classic` (refused under an explicit `consumer`, as librdkafka and Java refuse it; ignored with a warning when `group.protocol` is not set); unset means librdkafka's default"  # noqa: E501
C = Owner.CLASSIC

# Ranges are librdkafka 2.16.0's; the defaults are librdkafka's (applied by librdkafka, not here:
# the same names are broker settings elsewhere), and librdkafka checks the values again.
_CLASSIC_SPECS: tuple[KeySpec, ...] = (
    _int("session.timeout.ms", C, 1, 3_600_000, None, _CLASSIC + ", 45000. Must be <= `max.poll.interval.ms`."),  # noqa: E501
    _int("heartbeat.interval.ms", C, 1, 3_600_000, None, _CLASSIC + ", 3000."),
    KeySpec("partition.assignment.strategy", Kind.CSV_FLAGS, C, choices=ASSIGNMENT_STRATEGIES, note=_CLASSIC + ", `range,roundrobin`. Eager (`range`, `roundrobin`) and cooperative (`cooperative-sticky`) strategies cannot be mixed. A librdkafka `cooperative-sticky` group cannot be upgraded member by member (see `docs/howto/switching-protocol.md`)."),  # noqa: E501
    _str("group.protocol.type", C, None, _CLASSIC + ", `consumer`."),
)  # fmt: skip

_DATA_PLANE_SPECS: tuple[KeySpec, ...] = (
    _cb("stats_cb", D, "librdkafka statistics JSON (needs `statistics.interval.ms`)."),
    _cb("throttle_cb", D, "Broker throttling of data-plane requests."),
    _int("fetch.min.bytes", D, 0, INT32_MAX, 1),
    _int("fetch.max.bytes", D, 0, 2_147_483_135, 52_428_800, "Must be >= `message.max.bytes`."),
    _int("fetch.wait.max.ms", D, 0, 300_000, 500),
    _int("fetch.message.max.bytes", D, 1, 1_000_000_000, 1_048_576),
    _int("max.partition.fetch.bytes", D, 1, 1_000_000_000, 1_048_576, "Alias of `fetch.message.max.bytes`."),  # noqa: E501
    _int("fetch.error.backoff.ms", D, 0, 300_000, 500),
    _int("fetch.queue.backoff.ms", D, 0, 300_000, 1000),
    _int("queued.min.messages", D, 1, 10_000_000, 100_000),
    _int("queued.max.messages.kbytes", D, 1, 2_097_151, 65_536),
    _bool("check.crcs", D, False),
    _bool("enable.partition.eof", D, False),
    _int("receive.message.max.bytes", D, 1000, INT32_MAX, 100_000_000, "If set, must be >= `fetch.max.bytes` + 512."),  # noqa: E501
    _int("message.max.bytes", D, 1000, 1_000_000_000, 1_000_000),
    _int("message.copy.max.bytes", D, 0, 1_000_000_000, 65_535),
    _int("max.in.flight.requests.per.connection", D, 1, 1_000_000, 1_000_000),
    _int("max.in.flight", D, 1, 1_000_000, 1_000_000, "Alias of `max.in.flight.requests.per.connection`."),  # noqa: E501
    _int("statistics.interval.ms", D, 0, 86_400_000, 0),
    KeySpec("debug", Kind.CSV_FLAGS, D, choices=DEBUG_FLAGS, note="librdkafka debug contexts; the member logs through `logger`."),  # noqa: E501
    KeySpec("builtin.features", Kind.CSV_FLAGS, D, choices=BUILTIN_FEATURES),
    _int("log_level", D, 0, 7, 6),
    _bool("log.thread.name", D, True),
    _bool("log.connection.close", D, True),
    _int("topic.metadata.refresh.interval.ms", D, -1, 3_600_000, 300_000),
    _int("metadata.max.age.ms", D, 1, 86_400_000, 900_000),
    _int("topic.metadata.refresh.fast.interval.ms", D, 1, 60_000, 100),
    _bool("topic.metadata.refresh.sparse", D, True),
    _int("topic.metadata.propagation.max.ms", D, 0, 3_600_000, 30_000),
    _enum("metadata.recovery.strategy", D, ("none", "rebootstrap"), "rebootstrap"),
    _int("metadata.recovery.rebootstrap.trigger.ms", D, 0, INT32_MAX, 300_000),
    _bool("allow.auto.create.topics", D, False),
    _int("socket.send.buffer.bytes", D, 0, 100_000_000, 0),
    _int("socket.receive.buffer.bytes", D, 0, 100_000_000, 0),
    _bool("socket.keepalive.enable", D, False),
    _bool("socket.nagle.disable", D, True),
    _int("socket.max.fails", D, 0, 1_000_000, 1),
    _int("broker.address.ttl", D, 0, 86_400_000, 1000),
    _enum("broker.address.family", D, ("any", "v4", "v6"), "any"),
    _enum("client.dns.lookup", D, ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"), "use_all_dns_ips"),  # noqa: E501
    _int("connections.max.idle.ms", D, 0, INT32_MAX, 0),
    _bool("api.version.request", D, True, "Deprecated in librdkafka 2.16."),
    _int("api.version.request.timeout.ms", D, 1, 300_000, 10_000),
    _bool("enable.metrics.push", D, True, "KIP-714 metrics of the data-plane client."),
    _bool("enable.random.seed", D, True),
    _int("internal.termination.signal", D, 0, 128, 0),
)  # fmt: skip

SPECS: dict[str, KeySpec] = {s.name: s for s in _MEMBER_SPECS + _DATA_PLANE_SPECS + _CLASSIC_SPECS}

# Alternative spellings of keys we parse ourselves; the canonical key is what the member reads.
KEY_ALIASES: dict[str, str] = {
    "metadata.broker.list": "bootstrap.servers",
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
}

# Classic-protocol keys (the CLASSIC specs) refused under group.protocol=consumer, as Java (first
# three) and librdkafka (all four) refuse them; the value names the replacement.
CLASSIC_ONLY: dict[str, str] = {
    "session.timeout.ms": "the session timeout is a broker setting: 'group.consumer.session.timeout.ms'",  # noqa: E501
    "heartbeat.interval.ms": "the heartbeat interval is a broker setting: 'group.consumer.heartbeat.interval.ms'",  # noqa: E501
    "partition.assignment.strategy": "assignment is done by the broker: choose its assignor with 'group.remote.assignor' (uniform or range)",  # noqa: E501
    "group.protocol.type": "the protocol type is fixed by the consumer protocol; use 'group.remote.assignor' to choose the server-side assignor",  # noqa: E501
}

_NOT_IN_PYTHON = "a librdkafka C-API hook that cannot be set from Python"
_DEPRECATED = "deprecated and no longer used by librdkafka"
_SECURITY = (
    "the member's own connections (Python ssl; SASL PLAIN, SCRAM and OAUTHBEARER with oauth_cb, "
    "client-credentials OIDC or unsecured JWTs) do not implement it, and both planes must "
    "authenticate the same way"
)
_PRODUCER = "a producer setting; it has no effect on a consumer"

REFUSED: dict[str, str] = {
    "rebalance_cb": "rebalances are run by the member: pass on_assign/on_revoke/on_lost to subscribe()",  # noqa: E501
    "offset_commit_cb": "commits are made by the member: use 'on_commit'",
    "coordinator.query.interval.ms": "the member finds its coordinator itself (on start and after coordinator errors)",  # noqa: E501
    "max.poll.records": "it applies to librdkafka share consumers only",
    "share.acknowledgement.mode": "it applies to librdkafka share consumers only",
    "topic.blacklist": "the broker assigns partitions; hiding topics from the data plane would leave assigned partitions unfetched",  # noqa: E501
    "log.queue": "confluent-kafka manages it when 'logger' is set",
    "enabled_events": "the data plane is driven by poll(); librdkafka event types are not used",
    "plugin.library.paths": "plugins and interceptors would see only the data plane (no group membership, no commits)",  # noqa: E501
    "consume.callback.max.messages": "it applies to rd_kafka_consume_callback(), which confluent-kafka does not use",  # noqa: E501
    "default.topic.config": "it is deprecated in confluent-kafka: put topic-level keys at the top level",  # noqa: E501
    "on_delivery": _PRODUCER,
    "auto.commit.enable": "it is a deprecated alias: use 'enable.auto.commit'",
    "offset.store.method": _DEPRECATED,
    "offset.store.path": _DEPRECATED,
    "offset.store.sync.interval.ms": _DEPRECATED,
    "topic.metadata.refresh.fast.cnt": _DEPRECATED,
    "socket.blocking.max.ms": _DEPRECATED,
    "reconnect.backoff.jitter.ms": _DEPRECATED,
    "api.version.fallback.ms": _DEPRECATED + " (brokers 4.x always answer ApiVersions)",
    "broker.version.fallback": _DEPRECATED + " (brokers 4.x always answer ApiVersions)",
    "ssl.engine.location": _DEPRECATED,
}
for _name in (
    "consume_cb", "log_cb", "background_event_cb", "socket_cb", "connect_cb", "closesocket_cb",
    "open_cb", "resolve_cb", "opaque", "default_topic_conf", "interceptors", "ssl_key",
    "ssl_certificate", "ssl_ca", "ssl_engine_callback_data", "ssl.certificate.verify_cb",
    "oauthbearer_token_refresh_cb",
):  # fmt: skip
    REFUSED[_name] = _NOT_IN_PYTHON
for _name in (
    "ssl.cipher.suites", "ssl.curves.list", "ssl.sigalgs.list", "ssl.key.pem",
    "ssl.certificate.pem", "ssl.ca.pem", "ssl.ca.certificate.stores", "ssl.crl.location",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.providers", "ssl.engine.id",
    "https.ca.pem", "sasl.kerberos.service.name", "sasl.kerberos.principal",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.keytab", "sasl.kerberos.min.time.before.relogin",
    "sasl.oauthbearer.grant.type",
    "sasl.oauthbearer.assertion.algorithm", "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem", "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.claim.aud", "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss", "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.metadata.authentication.type",
):  # fmt: skip
    REFUSED[_name] = _SECURITY
for _name in (
    "transactional.id", "transaction.timeout.ms", "enable.idempotence", "enable.gapless.guarantee",
    "queue.buffering.max.messages", "queue.buffering.max.kbytes", "queue.buffering.max.ms",
    "linger.ms", "message.send.max.retries", "retries", "queue.buffering.backpressure.threshold",
    "compression.codec", "compression.type", "compression.level", "batch.num.messages",
    "batch.size", "delivery.report.only.error", "dr_cb", "dr_msg_cb",
    "sticky.partitioning.linger.ms", "request.required.acks", "acks", "request.timeout.ms",
    "message.timeout.ms", "delivery.timeout.ms", "queuing.strategy", "produce.offset.report",
    "partitioner", "partitioner_cb", "msg_order_cmp",
):  # fmt: skip
    REFUSED[_name] = _PRODUCER

# Every key classified above: all keys librdkafka 2.16.0 knows (global and topic level, from
# rd_kafka_conf_properties_show) plus those confluent-kafka handles in Python (a test checks the
# librdkafka list is covered). A key outside this set is a typo and gets close-match suggestions.
KNOWN_KEYS: frozenset[str] = frozenset(SPECS) | set(KEY_ALIASES) | set(CLASSIC_ONLY) | set(REFUSED)


_T = TypeVar("_T")


def spec_default(key: str, kind: type[_T]) -> _T:
    """The table's default of ``key``, checked to be a ``kind``.

    The table is the one place a default is written: the configuration dataclasses, the member
    core's ``MemberConfig`` and the runtime's connection settings read theirs from here.
    """
    value = SPECS[key].default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"the default of {key!r} is {value!r}, not a {kind.__name__}")
    return value


def accepted_keys() -> tuple[str, ...]:
    """Every key ``parse_config`` accepts (canonical names and aliases), sorted."""
    return tuple(sorted(set(SPECS) | set(KEY_ALIASES)))


def is_secret_key(name: str) -> bool:
    """True when a key's value must never be shown (passwords, secrets, private keys)."""
    lowered = name.lower()
    return any(
        marker in lowered
        for marker in ("password", "secret", "passphrase", "key.pem", "oauthbearer.config")
    )
