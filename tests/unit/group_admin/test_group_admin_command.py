"""``kgm group``'s command line without a broker: the properties file, TLS/SASL settings taken
from it (secrets never shown), where the cluster address comes from, option checks, and the
messages for a cluster that refuses or never answers (naming the address and the timeout)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from consumer._group_admin.command import (
    CommandError,
    read_properties,
    resolve_bootstrap_servers,
    security_from_properties,
)
from consumer.cli import main

SECRET = "s3cr3t-value"


def test_properties_file_takes_equals_and_colon_and_skips_comments(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# TLS\n! also a comment\n\nsecurity.protocol = SASL_SSL\n"
        "sasl.mechanism: PLAIN\nsasl.jaas.like=a=b\n"
    )
    assert read_properties(path) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.like": "a=b",
    }


def test_a_bad_line_names_the_file_and_line_but_not_its_text(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"security.protocol=ssl\n{SECRET}\n")
    with pytest.raises(
        CommandError, match=r"client.properties, line 2: expected key=value"
    ) as info:
        read_properties(path)
    assert SECRET not in str(info.value)
    with pytest.raises(CommandError, match="missing.properties"):
        read_properties(tmp_path / "missing.properties")


def test_security_keys_are_checked_and_the_password_kept_secret() -> None:
    properties = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "request.timeout.ms": "5000",  # for confluent-kafka's AdminClient only
    }
    security = security_from_properties(properties, "client.properties")
    assert (security.protocol, security.sasl_mechanism, security.sasl_username) == (
        "sasl_plaintext",
        "SCRAM-SHA-256",
        "alice",
    )
    assert security.sasl_password is not None
    assert security.sasl_password.reveal() == SECRET
    assert SECRET not in repr(security)


def test_a_bad_security_key_is_named_without_the_secret() -> None:
    properties = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "GSSAPI",
        "sasl.username": "alice",
        "sasl.password": SECRET,
    }
    with pytest.raises(CommandError, match=r"client.properties: Invalid value 'GSSAPI'") as info:
        security_from_properties(properties, "client.properties")
    assert SECRET not in str(info.value)


@pytest.fixture
def no_cluster_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("KGM_STATE_DIR", str(tmp_path / "no-broker-here"))


@pytest.mark.usefixtures("no_cluster_configured")
def test_bootstrap_comes_from_the_option_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(CommandError, match="kgm broker start --detach"):
        resolve_bootstrap_servers(None)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env-host:9092")
    assert resolve_bootstrap_servers(None) == "env-host:9092"
    assert resolve_bootstrap_servers("given:9093") == "given:9093"


@pytest.mark.usefixtures("no_cluster_configured")
def test_no_cluster_at_all_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["group", "list"]) == 1
    assert "no cluster given" in capsys.readouterr().err


@pytest.mark.parametrize("timeout", ["0", "-5", "soon"])
def test_timeout_must_be_positive_milliseconds(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["group", "list", "--timeout", timeout])
    assert info.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_refusing_broker_is_named_with_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    code = main(["group", "list", "--bootstrap-server", address, "--timeout", "1500"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"could not reach the Kafka cluster at {address} within 1500 ms (--timeout)" in err


def test_a_silent_broker_is_named_with_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as listener:  # accepts connections (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        code = main(["group", "describe", "g", "--bootstrap-server", address, "--timeout", "800"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"could not reach the Kafka cluster at {address} within 800 ms (--timeout)" in err


def test_a_key_confluent_kafka_refuses_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "client.properties"
    path.write_text("no.such.key=1\n")
    address = f"127.0.0.1:{_closed_port()}"
    code = main(["group", "list", "--bootstrap-server", address, "--command-config", str(path)])
    err = capsys.readouterr().err
    assert code == 1
    assert "AdminClient refused the configuration" in err
    assert '"no.such.key"' in err
