"""The throwaway PKI and the secure-listener settings, without a broker.

The certificates are proven with a real TLS handshake on loopback (Python's ``ssl``), host name
checks included; the broker itself is exercised in tests/integration/test_security_broker.py.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from consumer.testing.real.security import (
    STANDARD_AUTHORIZER,
    Listener,
    TestPki,
    create_test_pki,
    listener_overrides,
    scram_format_args,
    secure_broker_settings,
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return create_test_pki(tmp_path_factory.mktemp("pki"))


def _handshake(pki: TestPki, server_name: str, client_cert: bool) -> str:
    """TLS between a server using the broker certificate and a client trusting only the CA;
    returns the subject CN of the client certificate the server saw ("" if none)."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    server_ctx.load_cert_chain(str(pki.broker_cert), str(pki.broker_key))
    server_ctx.verify_mode = ssl.CERT_REQUIRED if client_cert else ssl.CERT_NONE
    client_ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if client_cert:
        client_ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    seen: list[str] = []
    errors: list[BaseException] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)

        def serve() -> None:
            try:
                conn, _ = listener.accept()
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    peer = tls.getpeercert()
                    subject = dict(item[0] for item in peer["subject"]) if peer else {}
                    seen.append(str(subject.get("commonName", "")))
                    tls.sendall(b"ok")
            except (OSError, ssl.SSLError) as exc:
                errors.append(exc)

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            raw = socket.create_connection(listener.getsockname(), timeout=10)
            with client_ctx.wrap_socket(raw, server_hostname=server_name) as tls:
                assert tls.recv(2) == b"ok"
        finally:
            thread.join(timeout=10)
    assert not errors, errors
    return seen[0]


@pytest.mark.parametrize("server_name", ["127.0.0.1", "localhost"])
def test_broker_certificate_is_trusted_for_loopback_names(pki: TestPki, server_name: str) -> None:
    assert _handshake(pki, server_name, client_cert=False) == ""


def test_client_certificate_is_accepted_and_names_the_client(pki: TestPki) -> None:
    assert _handshake(pki, "127.0.0.1", client_cert=True) == "client"


def test_other_host_names_are_rejected(pki: TestPki) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(pki, "example.com", client_cert=False)


def test_pem_files_have_the_layout_kafka_and_librdkafka_read(pki: TestPki) -> None:
    keystore = pki.broker_keystore.read_text()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
    assert keystore.count("-----BEGIN CERTIFICATE-----") == 2  # broker, then CA
    for path in (pki.ca_cert, pki.broker_cert, pki.client_cert):
        assert path.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert pki.client_key.read_text().startswith("-----BEGIN PRIVATE KEY-----")


def test_scram_format_args() -> None:
    assert scram_format_args({"alice": "s3cret"}) == (
        "--add-scram",
        "SCRAM-SHA-256=[name=alice,password=s3cret]",
        "--add-scram",
        "SCRAM-SHA-512=[name=alice,password=s3cret]",
    )
    assert scram_format_args({"bob": "x"}, ["SCRAM-SHA-512"]) == (
        "--add-scram",
        "SCRAM-SHA-512=[name=bob,password=x]",
    )
    with pytest.raises(ValueError, match="password"):
        scram_format_args({"alice": "a,b"})
    with pytest.raises(ValueError, match="not one of"):
        scram_format_args({"alice": "x"}, ["PLAIN"])


def test_listener_overrides_keep_plaintext_first_and_controller_last() -> None:
    props = listener_overrides(
        9092, 9093, [Listener("SSL", "SSL", 9094), Listener("M_A", "PLAINTEXT", 9095, 19095)]
    )
    assert props == {
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094,M_A://127.0.0.1:9095,"
        "CONTROLLER://127.0.0.1:9093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094,"
        "M_A://127.0.0.1:19095",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,"
        "M_A:PLAINTEXT",
        "controller.quorum.voters": "1@127.0.0.1:9093",
    }
    with pytest.raises(ValueError, match="duplicate"):
        listener_overrides(1, 2, [Listener("A", "SSL", 3), Listener("A", "SSL", 4)])
    with pytest.raises(ValueError, match="listener name"):
        Listener("PLAINTEXT", "PLAINTEXT", 1)
    with pytest.raises(ValueError, match="protocol"):
        Listener("X", "TLS", 1)


def test_secure_broker_settings(tmp_path: Path) -> None:
    settings = secure_broker_settings(tmp_path, users={"alice": "pw"}, acls=True)
    props = settings.overrides
    assert settings.pki is not None
    assert settings.pki.broker_keystore.exists()
    assert set(settings.listener_ports) == {"SSL", "SASL_PLAINTEXT", "SASL_SSL"}
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["listener.name.sasl_ssl.ssl.client.auth"] == "none"
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert 'user_alice="pw"' in props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert props["authorizer.class.name"] == STANDARD_AUTHORIZER
    assert props["super.users"] == "User:ANONYMOUS;User:admin"
    assert "--add-scram" in settings.format_args
    broker = settings.broker(ready_timeout_s=5.0)
    assert broker.port == settings.port
    assert broker.bootstrap_servers == settings.bootstrap("PLAINTEXT")
    assert tuple(broker.format_args) == settings.format_args
    assert broker.ready_timeout_s == 5.0

    ssl_client = settings.client_config("SSL")
    assert ssl_client["security.protocol"] == "SSL"
    assert ssl_client["ssl.certificate.location"] == str(settings.pki.client_cert)
    scram = settings.client_config("SASL_SSL", user="alice", mechanism="SCRAM-SHA-512")
    assert scram["sasl.password"] == "pw"
    assert scram["ssl.ca.location"] == str(settings.pki.ca_cert)
    assert (
        settings.client_config("SASL_PLAINTEXT", user="alice", password="no")["sasl.password"]
        == "no"
    )
    with pytest.raises(ValueError, match="needs a user"):
        settings.client_config("SASL_PLAINTEXT")


def test_sasl_only_settings_need_no_pki(tmp_path: Path) -> None:
    settings = secure_broker_settings(tmp_path, listeners=["SASL_PLAINTEXT"])
    assert settings.pki is None
    assert not list(tmp_path.iterdir())
    assert "authorizer.class.name" not in settings.overrides
    with pytest.raises(ValueError, match="unknown listeners"):
        secure_broker_settings(tmp_path, listeners=["KERBEROS"])
