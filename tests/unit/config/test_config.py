"""parse_config: defaults, types, ranges, normalisation, refusals, suggestions, secret masking."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from consumer._config.spec import accepted_keys
from consumer.config import (
    BrokerAddress,
    ConfigError,
    ConsumerConfig,
    Secret,
    SecurityConfig,
    parse_config,
)

BASE: dict[str, object] = {"bootstrap.servers": "localhost:9092", "group.id": "orders"}


def parse(extra: dict[str, object] | None = None) -> ConsumerConfig:
    return parse_config({**BASE, **(extra or {})})


def refused(extra: dict[str, object], base: dict[str, object] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({**(BASE if base is None else base), **extra})
    return str(info.value)


# --------------------------------------------------------------------------- defaults


def test_defaults_of_owned_keys() -> None:
    config = parse()
    assert config.bootstrap_servers == (BrokerAddress("localhost", 9092),)
    assert config.group_id == "orders"
    assert config.group_protocol == "consumer"
    assert config.group_remote_assignor is None
    assert config.group_instance_id is None
    assert config.client_id == "kafka-group-member"
    assert config.client_rack is None
    assert config.max_poll_interval_ms == 300_000
    assert config.rebalance_timeout_ms == 300_000
    assert config.enable_auto_commit is True
    assert config.auto_commit_interval_ms == 5000
    assert config.enable_auto_offset_store is True
    assert config.auto_offset_reset == "latest"
    assert config.isolation_level == "read_committed"
    assert config.socket_timeout_ms == 60_000
    assert config.socket_connection_setup_timeout_ms == 30_000
    assert config.retry_backoff_ms == 100
    assert config.retry_backoff_max_ms == 1000
    assert config.reconnect_backoff_ms == 100
    assert config.reconnect_backoff_max_ms == 10_000
    assert config.security == SecurityConfig()
    assert config.security.protocol == "plaintext"
    assert config.security.ssl_endpoint_identification_algorithm == "https"
    assert config.security.enable_ssl_certificate_verification is True
    assert (config.error_cb, config.on_commit, config.on_state_change) == (None, None, None)
    assert (config.stats_cb, config.throttle_cb, config.logger) == (None, None, None)


def test_the_input_dict_is_not_modified() -> None:
    given = {**BASE, "enable.auto.commit": "true", "fetch.wait.max.ms": "50"}
    snapshot = dict(given)
    parse_config(given)
    assert given == snapshot


def test_config_is_frozen() -> None:
    config = parse()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.group_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.data_plane["group.id"] = "other"  # type: ignore[index]


# --------------------------------------------------------------------------- ranges of owned ints

OWNED_INTS = [
    # key, lowest, highest, field
    ("max.poll.interval.ms", 1, 86_400_000, "max_poll_interval_ms"),
    ("auto.commit.interval.ms", 0, 86_400_000, "auto_commit_interval_ms"),
    ("socket.timeout.ms", 10, 300_000, "socket_timeout_ms"),
    (
        "socket.connection.setup.timeout.ms",
        1000,
        2_147_483_647,
        "socket_connection_setup_timeout_ms",
    ),
    ("retry.backoff.ms", 1, 300_000, "retry_backoff_ms"),
    ("retry.backoff.max.ms", 1, 300_000, "retry_backoff_max_ms"),
    ("reconnect.backoff.ms", 0, 3_600_000, "reconnect_backoff_ms"),
    ("reconnect.backoff.max.ms", 0, 3_600_000, "reconnect_backoff_max_ms"),
]


def _consistent(key: str, value: int | str) -> dict[str, object]:
    """Other keys that keep a single-key change within the cross-key rules."""
    if key == "reconnect.backoff.ms":
        return {key: value, "reconnect.backoff.max.ms": 3_600_000}
    if key == "reconnect.backoff.max.ms":
        return {key: value, "reconnect.backoff.ms": 0}
    return {key: value}


@pytest.mark.parametrize(("key", "lowest", "highest", "field"), OWNED_INTS)
def test_owned_int_bounds_are_accepted(key: str, lowest: int, highest: int, field: str) -> None:
    assert getattr(parse(_consistent(key, lowest)), field) == lowest
    assert getattr(parse(_consistent(key, highest)), field) == highest
    assert getattr(parse(_consistent(key, str(highest))), field) == highest


@pytest.mark.parametrize(("key", "lowest", "highest", "field"), OWNED_INTS)
@pytest.mark.parametrize("side", ["below", "above"])
def test_owned_int_out_of_range_is_refused(
    key: str, lowest: int, highest: int, field: str, side: str
) -> None:
    value = lowest - 1 if side == "below" else highest + 1
    message = refused({key: value})
    assert f"'{key}'" in message
    assert str(value) in message
    assert f"{lowest}..{highest}" in message


INT_KEYS = [key for key, *_ in OWNED_INTS] + ["fetch.wait.max.ms", "log_level"]
BOOL_KEYS = ["enable.auto.commit", "enable.auto.offset.store", "check.crcs"]
ENUM_KEYS = ["auto.offset.reset", "isolation.level", "security.protocol", "sasl.mechanism"]
STRING_KEYS = ["group.id", "group.remote.assignor", "client.id", "client.rack", "sasl.username"]
CALLABLE_KEYS = ["error_cb", "on_commit", "on_state_change", "stats_cb", "throttle_cb"]


@pytest.mark.parametrize("key", INT_KEYS)
@pytest.mark.parametrize("value", ["abc", 1.5, True, None, "100ms", "1e3", "0x10", ""])
def test_int_keys_refuse_non_integers(key: str, value: object) -> None:
    message = refused({key: value})
    assert f"'{key}'" in message
    assert repr(value) in message
    assert "an integer in" in message


@pytest.mark.parametrize("key", BOOL_KEYS)
@pytest.mark.parametrize("value", ["yes", "1", 1, 0, None, "t"])
def test_bool_keys_refuse_other_values(key: str, value: object) -> None:
    message = refused({key: value})
    assert f"'{key}'" in message
    assert repr(value) in message
    assert "True/False or 'true'/'false'" in message


@pytest.mark.parametrize("key", ENUM_KEYS)
@pytest.mark.parametrize("value", ["bogus", 3, None])
def test_enum_keys_refuse_other_values(key: str, value: object) -> None:
    message = refused({key: value})
    assert f"'{key}'" in message
    assert repr(value) in message
    assert "one of" in message


@pytest.mark.parametrize("key", STRING_KEYS)
@pytest.mark.parametrize("value", ["", "   ", 5, None, b"bytes"])
def test_string_keys_refuse_empty_and_non_strings(key: str, value: object) -> None:
    message = refused({key: value})
    assert f"'{key}'" in message
    assert "a non-empty string" in message


@pytest.mark.parametrize("key", CALLABLE_KEYS)
def test_callable_keys_refuse_non_callables(key: str) -> None:
    message = refused({key: "print"})
    assert f"'{key}'" in message
    assert "'print'" in message
    assert "a callable" in message


def test_callables_and_logger_are_kept() -> None:
    def on_change(previous: str, current: str) -> None:
        pass

    logger = logging.getLogger("test.config")
    config = parse({"on_state_change": on_change, "on_commit": print, "logger": logger})
    assert config.on_state_change is on_change
    assert config.on_commit is print
    assert config.logger is logger
    adapter = logging.LoggerAdapter(logger, {})
    assert parse({"logger": adapter}).logger is adapter
    assert "logging.Logger" in refused({"logger": print})


# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("smallest", "earliest"),
        ("earliest", "earliest"),
        ("beginning", "earliest"),
        ("Beginning", "earliest"),
        ("largest", "latest"),
        ("latest", "latest"),
        ("END", "latest"),
        ("error", "error"),
    ],
)
def test_auto_offset_reset_is_normalised(given: str, expected: str) -> None:
    config = parse({"auto.offset.reset": given})
    assert config.auto_offset_reset == expected
    assert config.data_plane["auto.offset.reset"] == expected


def test_java_none_offset_reset_is_refused() -> None:
    assert "'error'" in refused({"auto.offset.reset": "none"})


@pytest.mark.parametrize(
    ("key", "given", "field", "expected"),
    [
        ("isolation.level", "READ_UNCOMMITTED", "isolation_level", "read_uncommitted"),
        ("enable.auto.commit", "FALSE", "enable_auto_commit", False),
        ("enable.auto.commit", "true", "enable_auto_commit", True),
        ("enable.auto.offset.store", False, "enable_auto_offset_store", False),
        ("max.poll.interval.ms", " 45000 ", "max_poll_interval_ms", 45_000),
        ("auto.commit.interval.ms", "+0", "auto_commit_interval_ms", 0),
        ("group.protocol", "CONSUMER", "group_protocol", "consumer"),
        ("group.remote.assignor", "uniform", "group_remote_assignor", "uniform"),
        ("client.rack", "rack-1", "client_rack", "rack-1"),
        ("group.instance.id", "instance-1.a_b", "group_instance_id", "instance-1.a_b"),
    ],
)
def test_values_are_coerced(key: str, given: object, field: str, expected: object) -> None:
    assert getattr(parse({key: given}), field) == expected


def test_security_keys_are_typed() -> None:
    security = parse(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": "s3cret",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.certificate.location": "/etc/cert.pem",
            "ssl.key.location": "/etc/key.pem",
            "ssl.key.password": "k3y",
            "ssl.endpoint.identification.algorithm": "NONE",
            "enable.ssl.certificate.verification": "false",
        }
    ).security
    assert security.protocol == "sasl_ssl"
    assert security.uses_ssl
    assert security.uses_sasl
    assert security.sasl_mechanism == "SCRAM-SHA-512"
    assert security.sasl_username == "alice"
    assert security.sasl_password == Secret("s3cret")
    assert security.sasl_password is not None
    assert security.sasl_password.reveal() == "s3cret"
    assert security.ssl_key_password is not None
    assert security.ssl_key_password.reveal() == "k3y"
    assert (security.ssl_ca_location, security.ssl_key_location) == ("/etc/ca.pem", "/etc/key.pem")
    assert security.ssl_certificate_location == "/etc/cert.pem"
    assert security.ssl_endpoint_identification_algorithm == "none"
    assert security.enable_ssl_certificate_verification is False


def test_unimplemented_sasl_mechanisms_are_refused() -> None:
    message = refused({"sasl.mechanism": "GSSAPI"})
    assert "'GSSAPI'" in message
    assert "'PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER'" in message


@pytest.mark.parametrize("missing", ["sasl.mechanism", "sasl.username", "sasl.password"])
def test_sasl_protocols_need_mechanism_and_credentials(missing: str) -> None:
    sasl: dict[str, object] = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    del sasl[missing]
    message = refused(sasl)
    assert f"'{missing}' is required with security.protocol=sasl_plaintext" in message


# --------------------------------------------------------------------------- bootstrap.servers


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("broker:9092", [("broker", 9092)]),
        ("a:1, b:2 ,c:65535", [("a", 1), ("b", 2), ("c", 65535)]),
        ("10.0.0.1:19092,", [("10.0.0.1", 19092)]),
        ("[::1]:9093", [("::1", 9093)]),
        ("[fe80::1]", [("fe80::1", 9092)]),
        ("kafka.example.com", [("kafka.example.com", 9092)]),
        ("PLAINTEXT://h:9094", [("h", 9094)]),
        ("SASL_SSL://h-2:9095", [("h-2", 9095)]),
    ],
)
def test_bootstrap_servers_are_parsed(given: str, expected: list[tuple[str, int]]) -> None:
    config = parse({"bootstrap.servers": given})
    assert config.bootstrap_servers == tuple(BrokerAddress(h, p) for h, p in expected)
    assert config.data_plane["bootstrap.servers"] == ",".join(
        str(BrokerAddress(h, p)) for h, p in expected
    )


@pytest.mark.parametrize(
    "given",
    ["", " , ", ":9092", "h:0", "h:65536", "h:abc", "h:", "::1:9092", "[::1", "[]:1", "a b:1",
     "h:9092:1", "[::1]x", "h:-1", "h:²", 9092, None, ["h:1"], "bad//x://h:1"],
)  # fmt: skip
def test_bad_bootstrap_servers_are_refused(given: object) -> None:
    message = refused({"bootstrap.servers": given})
    assert "'bootstrap.servers'" in message
    assert repr(given) in message
    assert "host:port" in message


def test_metadata_broker_list_is_an_alias() -> None:
    config = parse_config({"metadata.broker.list": "h:1", "group.id": "g"})
    assert config.bootstrap_servers == (BrokerAddress("h", 1),)
    same = parse_config(
        {"metadata.broker.list": "h:1", "bootstrap.servers": "h:1", "group.id": "g"}
    )
    assert same.bootstrap_servers == (BrokerAddress("h", 1),)
    message = refused(
        {"metadata.broker.list": "h:1", "bootstrap.servers": "h:2"}, base={"group.id": "g"}
    )  # noqa: E501
    assert "'metadata.broker.list'" in message
    assert "'bootstrap.servers'" in message
    assert "different values" in message


# --------------------------------------------------------------------------- required / protocol


@pytest.mark.parametrize("key", ["bootstrap.servers", "group.id"])
def test_required_keys(key: str) -> None:
    given = dict(BASE)
    del given[key]
    with pytest.raises(ConfigError, match=f"'{key}' is required"):
        parse_config(given)


@pytest.mark.parametrize("value", ["x" * 250, "has space", "slash/no", ".", "..", ""])
def test_bad_group_instance_id_is_refused(value: str) -> None:
    message = refused({"group.instance.id": value})
    assert "'group.instance.id'" in message
    assert repr(value)[:40] in message


def test_not_a_mapping_or_non_string_key() -> None:
    with pytest.raises(ConfigError, match="must be a dict"):
        parse_config([("group.id", "g")])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="keys are strings"):
        parse_config({**BASE, 5: "x"})  # type: ignore[dict-item]


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# --------------------------------------------------------------------------- unknown, refused keys


def test_unknown_key_names_close_match() -> None:
    assert refused({"gruop.id": "g"}) == (
        "'gruop.id' is not a configuration key; did you mean 'group.id'?"
    )


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("max.poll.interval", "max.poll.interval.ms"),
        ("auto.offset.rest", "auto.offset.reset"),
        ("enable.autocommit", "enable.auto.commit"),
        ("bootstrap.server", "bootstrap.servers"),
        ("sasl.pasword", "sasl.password"),
        # Refused and classic-only keys are suggested too: their own message says why.
        ("max.poll.record", "max.poll.records"),
        ("session.timeout", "session.timeout.ms"),
        ("transactional.ids", "transactional.id"),
    ],
)
def test_unknown_keys_suggest(typo: str, suggestion: str) -> None:
    message = refused({typo: 1})
    assert message.startswith(f"'{typo}' is not a configuration key; did you mean ")
    assert f"'{suggestion}'" in message


def test_unknown_key_without_close_match() -> None:
    message = refused({"zzzz": 1})
    assert message == (
        "'zzzz' is not a configuration key; "
        "docs/reference/configuration.md lists the accepted keys."
    )


@pytest.mark.parametrize(
    ("key", "replacement"),
    [
        ("session.timeout.ms", "'group.consumer.session.timeout.ms'"),
        ("heartbeat.interval.ms", "'group.consumer.heartbeat.interval.ms'"),
        ("partition.assignment.strategy", "'group.remote.assignor'"),
        ("group.protocol.type", "'group.remote.assignor'"),
    ],
)
def test_classic_only_keys_are_refused_with_replacement(key: str, replacement: str) -> None:
    message = refused({key: "45000", "group.protocol": "consumer"})
    assert message.startswith(f"'{key}' is a classic-protocol setting")
    assert "group.protocol=consumer" in message
    assert replacement in message


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("linger.ms", "producer setting"),
        ("request.timeout.ms", "producer setting"),
        ("rebalance_cb", "on_assign/on_revoke/on_lost"),
        ("offset_commit_cb", "'on_commit'"),
        ("auto.commit.enable", "'enable.auto.commit'"),
        ("coordinator.query.interval.ms", "coordinator"),
        ("max.poll.records", "share consumers"),
        ("sasl.kerberos.keytab", "OAUTHBEARER"),
        ("socket.blocking.max.ms", "deprecated"),
        ("log_cb", "cannot be set from Python"),
    ],
)
def test_known_but_unused_keys_are_refused_with_reason(key: str, reason: str) -> None:
    message = refused({key: "1"})
    assert message.startswith(f"'{key}' is not accepted: ")
    assert reason in message


LIBRDKAFKA_KEYS = [
    line
    for line in (Path(__file__).parent / "librdkafka_2_16_0_keys.txt").read_text().splitlines()
    if line and not line.startswith("#")
]


def test_librdkafka_key_list_is_complete() -> None:
    assert len(LIBRDKAFKA_KEYS) == 193


@pytest.mark.parametrize("key", LIBRDKAFKA_KEYS)
def test_every_librdkafka_key_is_accepted_or_refused_with_a_reason(key: str) -> None:
    if key in accepted_keys():
        return  # its values are tested above
    message = refused({key: "a-value"})
    assert "is not a configuration key" not in message
    assert f"'{key}'" in message


# --------------------------------------------------------------------------- secrets

SECRET = "hunter2-very-secret"


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "sasl.oauthbearer.client.secret",
    ],
)
@pytest.mark.parametrize("value", [SECRET, 987654321, [SECRET], ""])
def test_secret_values_never_appear_in_errors(key: str, value: object) -> None:
    message = refused({key: value, "unknown.key": 1})
    assert SECRET not in message
    assert "987654321" not in message


def test_secret_typed_badly_is_masked() -> None:
    message = refused({"sasl.password": 4242})
    assert message == ("Invalid value '***' for 'sasl.password': expected a non-empty string.")


def test_secrets_are_masked_in_repr_and_str() -> None:
    config = parse(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": SECRET,
            "ssl.key.password": SECRET + "-key",
        }
    )
    for shown in (repr(config), str(config), repr(config.security), str(config.security),
                  repr(config.data_plane), str(config.data_plane),
                  repr(config.security.sasl_password), str(config.security.sasl_password),
                  f"{config.security.ssl_key_password}"):  # fmt: skip
        assert SECRET not in shown
        assert "***" in shown
    assert "alice" in repr(config.security)
    # librdkafka needs the clear value, and gets it
    assert dict(config.data_plane)["sasl.password"] == SECRET
    assert dict(config.data_plane)["ssl.key.password"] == SECRET + "-key"
