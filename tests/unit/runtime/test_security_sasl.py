"""Control-plane security: SCRAM (RFC 7677 vector), PLAIN, SSL contexts, and SASL on a
:class:`BrokerConnection` against a fake broker that plays the server side of SCRAM.

Every network test is bounded by ``asyncio.wait_for``; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataResponse
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest, SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest, SaslHandshakeResponse
from kio.static.primitive import i64Timedelta
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from consumer._bridge.settings import ClusterSettings
from consumer._config.types import Secret
from consumer._runtime.connection import BrokerConnection
from consumer._runtime.retry import CONNECT_RETRY
from consumer._runtime.sasl_mechanisms import (
    PlainClient,
    SaslAuthenticationFailedError,
    SaslCredentials,
    ScramClient,
)
from consumer._runtime.security import ConnectionSecurity, build_ssl_context, connection_security
from consumer._wire import build_metadata_request
from consumer._wire._units import i32_timedelta_from_ms
from consumer.config import ConfigError, SecurityConfig, parse_config
from consumer.errors import BrokerError, ConsumerError, KafkaConnectionError
from consumer.testing.real.security import TestPki, create_test_pki

T = TypeVar("T")
BOUND_S = 10.0
FakeFactory = Callable[..., Awaitable[Any]]

PASSWORD = "pencil-Secret-42"
RANGES = {
    3: (0, 12),  # Metadata v12: the version the fake broker answers
    8: (2, 10),
    9: (1, 10),
    10: (0, 6),
    17: (0, 1),
    18: (0, 4),
    36: (0, 2),
    68: (0, 1),
    69: (0, 1),
}


async def bounded(awaitable: Awaitable[T], seconds: float = BOUND_S) -> T:
    return await asyncio.wait_for(awaitable, seconds)


# ----------------------------------------------------------------------------------------------
# SCRAM: RFC 7677 section 3 (SCRAM-SHA-256, user "user", password "pencil")

RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_client() -> ScramClient:
    return ScramClient("SCRAM-SHA-256", "user", Secret("pencil"), nonce=RFC_NONCE)


def test_scram_sha256_matches_the_rfc7677_test_vector() -> None:
    client = rfc_client()
    assert client.step(None) == RFC_CLIENT_FIRST
    assert client.step(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.step(RFC_SERVER_FINAL) is None


def test_scram_refuses_a_server_signature_that_does_not_verify() -> None:
    client = rfc_client()
    client.client_first()
    client.client_final(RFC_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(SaslAuthenticationFailedError) as caught:
        client.verify_server_final(forged)
    assert "server signature does not verify" in str(caught.value)
    assert caught.value.code == 58
    assert not caught.value.retriable
    assert "pencil" not in str(caught.value)


@pytest.mark.parametrize(
    ("server_first", "reason"),
    [
        (b"r=someone-elses-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024", "fewer than 4096"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=!!!,i=4096", "malformed"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "malformed"),
        (b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "mandatory"),
        (b"e=unknown-user", "unknown-user"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_scram_refuses_a_bad_server_first_message(server_first: bytes, reason: str) -> None:
    client = rfc_client()
    client.client_first()
    with pytest.raises(SaslAuthenticationFailedError, match=reason):
        client.client_final(server_first)


def test_scram_server_error_and_out_of_order_messages_are_refused() -> None:
    client = rfc_client()
    with pytest.raises(SaslAuthenticationFailedError, match="before server-first"):
        client.verify_server_final(RFC_SERVER_FINAL)
    client.client_final(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        client.verify_server_final(b"e=invalid-proof")


def test_scram_escapes_the_user_name_and_uses_a_fresh_random_nonce() -> None:
    first = ScramClient("SCRAM-SHA-512", "a=b,c", Secret("x")).client_first()
    second = ScramClient("SCRAM-SHA-512", "a=b,c", Secret("x")).client_first()
    assert first.startswith(b"n,,n=a=3Db=2Cc,r=")
    assert first != second
    assert len(first) - len(b"n,,n=a=3Db=2Cc,r=") >= 24


def test_scram_sha512_round_trip_against_an_independent_server() -> None:
    server = ScramServer("alice", PASSWORD, "sha512")
    client = ScramClient("SCRAM-SHA-512", "alice", Secret(PASSWORD))
    server_first = server.first(client.step(None) or b"")
    server_final = server.final(client.step(server_first) or b"")
    assert server_final is not None
    assert server_final.startswith(b"v=")
    assert client.step(server_final) is None


def test_scram_reprs_hide_the_password() -> None:
    client = rfc_client()
    client.client_final(RFC_SERVER_FIRST)
    assert "pencil" not in repr(client)
    assert "pencil" not in repr(PlainClient("user", Secret("pencil")))


# ----------------------------------------------------------------------------------------------
# PLAIN


def test_plain_message_is_empty_authzid_nul_user_nul_password() -> None:
    client = PlainClient("alice", Secret("alice-secret"))
    assert client.step(None) == b"\x00alice\x00alice-secret"
    assert client.step(b"") is None


def test_plain_encodes_utf8() -> None:
    assert PlainClient("jörg", Secret("pässword")).step(None) == (
        b"\x00j\xc3\xb6rg\x00p\xc3\xa4ssword"
    )


# ----------------------------------------------------------------------------------------------
# SSL contexts


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return create_test_pki(tmp_path_factory.mktemp("unit-pki"))


def _ssl(**fields: Any) -> SecurityConfig:
    return SecurityConfig(protocol="ssl", **fields)


def test_ssl_context_verifies_the_broker_by_default(pki: TestPki) -> None:
    context = build_ssl_context(_ssl(ssl_ca_location=str(pki.ca_cert)))
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert context.cert_store_stats()["x509_ca"] >= 1


def test_ssl_context_loads_the_client_certificate_for_mutual_tls(pki: TestPki) -> None:
    context = build_ssl_context(
        _ssl(
            ssl_ca_location=str(pki.ca_cert),
            ssl_certificate_location=str(pki.client_cert),
            ssl_key_location=str(pki.client_key),
        )
    )
    assert context.verify_mode is ssl.CERT_REQUIRED


def test_ssl_context_reads_an_encrypted_key_with_its_password(pki: TestPki, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(pki.client_key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-Secret-9"),
        )
    )
    settings = {
        "ssl_ca_location": str(pki.ca_cert),
        "ssl_certificate_location": str(pki.client_cert),
        "ssl_key_location": str(encrypted),
    }
    build_ssl_context(_ssl(**settings, ssl_key_password=Secret("key-Secret-9")))
    with pytest.raises(ConfigError) as caught:
        build_ssl_context(_ssl(**settings, ssl_key_password=Secret("wrong-key-Secret")))
    assert "ssl.key.password" in str(caught.value)
    assert "wrong-key-Secret" not in str(caught.value)


def test_endpoint_identification_none_keeps_certificate_verification(pki: TestPki) -> None:
    context = build_ssl_context(
        _ssl(ssl_ca_location=str(pki.ca_cert), ssl_endpoint_identification_algorithm="none")
    )
    assert context.check_hostname is False
    assert context.verify_mode is ssl.CERT_REQUIRED


def test_disabled_certificate_verification_verifies_nothing() -> None:
    context = build_ssl_context(_ssl(enable_ssl_certificate_verification=False))
    assert context.check_hostname is False
    assert context.verify_mode is ssl.CERT_NONE


def test_ca_directory_is_accepted(pki: TestPki) -> None:
    build_ssl_context(_ssl(ssl_ca_location=str(pki.folder)))


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"ssl_ca_location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        ({"ssl_certificate_location": "/nonexistent/client.pem"}, "ssl.certificate.location"),
        ({"ssl_key_location": "/nonexistent/client.key"}, "ssl.certificate.location"),
    ],
)
def test_unusable_ssl_files_give_a_config_error_naming_the_key(
    fields: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_ssl_context(_ssl(**fields))


def test_connection_security_per_protocol(pki: TestPki) -> None:
    assert connection_security(None) is None
    assert connection_security(SecurityConfig()) is None
    tls = connection_security(_ssl(ssl_ca_location=str(pki.ca_cert)))
    assert tls is not None
    assert tls.ssl_context is not None
    assert tls.sasl is None
    assert connection_security(tls) is tls
    sasl = connection_security(
        SecurityConfig(
            protocol="sasl_plaintext",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="alice",
            sasl_password=Secret(PASSWORD),
        )
    )
    assert sasl is not None
    assert sasl.ssl_context is None
    assert sasl.sasl == SaslCredentials("SCRAM-SHA-256", "alice", Secret(PASSWORD))
    with pytest.raises(ConfigError, match="sasl.password"):
        connection_security(
            SecurityConfig(protocol="sasl_ssl", sasl_mechanism="PLAIN", sasl_username="alice")
        )
    with pytest.raises(ConfigError, match="GSSAPI"):
        SaslCredentials("GSSAPI", "alice", Secret(PASSWORD))


def test_no_settings_object_shows_a_secret_in_its_repr() -> None:
    config = parse_config(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "group.id": "g",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
            "ssl.key.password": "key-" + PASSWORD,
            "enable.ssl.certificate.verification": False,
        }
    )
    security = connection_security(config.security)
    cluster = ClusterSettings("127.0.0.1:9092", "c", security=config.security)
    for thing in (config, config.security, security, cluster, config.data_plane):
        assert PASSWORD not in repr(thing), thing
        assert PASSWORD not in str(thing), thing
    assert security is not None
    assert security.sasl is not None
    assert PASSWORD not in repr(security.sasl)


# ----------------------------------------------------------------------------------------------
# SASL on a BrokerConnection (fake broker playing the SCRAM / PLAIN server)


class ScramServer:
    """The server side of SCRAM, written from RFC 5802 for these tests."""

    def __init__(self, user: str, password: str, hash_name: str, *, forge: bool = False) -> None:
        self.user = user
        self.hash_name = hash_name
        self.salt = b"fixed-test-salt!"
        self.iterations = 4096
        self.salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), self.salt, 4096)
        self.forge = forge
        self.client_first_bare = ""
        self.server_first = ""

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,")
        self.client_first_bare = text[3:]
        fields = dict(part.split("=", 1) for part in self.client_first_bare.split(","))
        assert fields["n"] == self.user
        salt = base64.b64encode(self.salt).decode()
        self.server_first = f"r={fields['r']}server-part,s={salt},i={self.iterations}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes | None:
        """``v=...`` for a valid proof, None for a wrong one."""
        text = client_final.decode()
        without_proof, _, proof_part = text.rpartition(",p=")
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        client_key = self._hmac(self.salted, b"Client Key")
        stored = hashlib.new(self.hash_name, client_key).digest()
        signature = self._hmac(stored, auth)
        recovered = bytes(
            a ^ b for a, b in zip(base64.b64decode(proof_part), signature, strict=True)
        )
        if hashlib.new(self.hash_name, recovered).digest() != stored:
            return None
        server_signature = self._hmac(self._hmac(self.salted, b"Server Key"), auth)
        if self.forge:
            server_signature = bytes(b ^ 0xFF for b in server_signature)
        return b"v=" + base64.b64encode(server_signature)


@dataclass
class SaslBroker:
    """Handler for FakeBroker: SaslHandshake v1 + SaslAuthenticate v2, then Metadata."""

    user: str = "alice"
    password: str = PASSWORD
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    forge: bool = False
    echo_password_in_error: bool = False
    order: list[str] = field(default_factory=list)
    scram: ScramServer | None = None
    mechanism: str = ""
    authenticated: bool = False

    async def __call__(self, header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        if isinstance(request, SaslHandshakeRequest):
            self.order.append("handshake")
            self.mechanism = request.mechanism
            self.authenticated = False
            known = request.mechanism in self.mechanisms
            if request.mechanism.startswith("SCRAM"):
                hash_name = "sha256" if request.mechanism.endswith("256") else "sha512"
                self.scram = ScramServer(self.user, self.password, hash_name, forge=self.forge)
            return SaslHandshakeResponse(
                error_code=ErrorCode.none if known else ErrorCode.unsupported_sasl_mechanism,
                mechanisms=self.mechanisms,
            )
        if isinstance(request, SaslAuthenticateRequest):
            self.order.append("authenticate")
            return self._authenticate(request.auth_bytes)
        self.order.append(type(request).__name__)
        assert self.authenticated, "request before authentication"
        return MetadataResponse(
            throttle_time=i32_timedelta_from_ms(0), brokers=(), cluster_id="c", topics=()
        )

    def _authenticate(self, auth_bytes: bytes) -> SaslAuthenticateResponse:
        answer: bytes | None
        if self.mechanism == "PLAIN":
            answer = b"" if auth_bytes == f"\0{self.user}\0{self.password}".encode() else None
        else:
            assert self.scram is not None
            if auth_bytes.startswith(b"n,,"):
                return _auth_ok(self.scram.first(auth_bytes))
            answer = self.scram.final(auth_bytes)
        if answer is None:
            given = auth_bytes.decode(errors="replace")
            message = (
                f"Authentication failed: invalid credentials {given}"
                if self.echo_password_in_error
                else "Authentication failed: Invalid username or password"
            )
            return SaslAuthenticateResponse(
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=message,
                auth_bytes=b"",
                session_lifetime=i64Timedelta.parse(datetime.timedelta(0)),
            )
        self.authenticated = True
        return _auth_ok(answer)


def _auth_ok(data: bytes) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.none,
        error_message=None,
        auth_bytes=data,
        session_lifetime=i64Timedelta.parse(datetime.timedelta(0)),
    )


def sasl_connection(port: int, mechanism: str, password: str) -> BrokerConnection:
    security = ConnectionSecurity(
        protocol="sasl_plaintext",
        sasl=SaslCredentials(mechanism, "alice", Secret(password)),
    )
    return BrokerConnection(
        "127.0.0.1",
        port,
        request_timeout_ms=2_000,
        retry_policy=CONNECT_RETRY,
        security=security,
    )


async def _metadata(connection: BrokerConnection) -> None:
    await bounded(connection.request(build_metadata_request(12, ())))  # (re)connects if needed


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_connection_authenticates_before_other_requests_on_every_connect(
    fake_broker_factory: FakeFactory, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    handler = SaslBroker()
    broker = await fake_broker_factory(api_ranges=RANGES, handler=handler)
    connection = sasl_connection(broker.port, mechanism, PASSWORD)
    try:
        await bounded(connection.connect())
        await _metadata(connection)
        rounds = ["authenticate"] * (1 if mechanism == "PLAIN" else 2)
        assert handler.order == ["handshake", *rounds, "MetadataRequest"]
        assert [int(h.request_api_key) for h, _ in broker.requests][:2] == [18, 17]
        session = connection._session  # white-box: await the session noticing the close
        assert session is not None
        broker.drop_connections()  # the next request reconnects and authenticates again
        await bounded(asyncio.shield(session.lost))
        assert not connection.is_connected
        handler.order.clear()
        await _metadata(connection)
        assert handler.order == ["handshake", *rounds, "MetadataRequest"]
    finally:
        await connection.close()
    assert any("authenticated to" in r.getMessage() for r in caplog.records)
    _assert_no_secret(caplog, PASSWORD)


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_wrong_password_fails_fast_with_a_typed_error_and_no_secret(
    fake_broker_factory: FakeFactory, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + PASSWORD
    handler = SaslBroker(echo_password_in_error=True)
    broker = await fake_broker_factory(api_ranges=RANGES, handler=handler)
    connection = sasl_connection(broker.port, mechanism, wrong)
    with pytest.raises(SaslAuthenticationFailedError) as caught:
        await bounded(connection.connect())
    await connection.close()
    error = caught.value
    assert isinstance(error, BrokerError)
    assert isinstance(error, ConsumerError)
    assert not isinstance(error, KafkaConnectionError)  # not retried as a transport failure
    assert error.name == "SASL_AUTHENTICATION_FAILED"
    assert not error.retriable
    assert "alice" in str(error)
    assert mechanism in str(error)
    assert wrong not in str(error)
    assert PASSWORD not in str(error)
    assert broker.connections == 1, "an authentication failure must not be retried"
    _assert_no_secret(caplog, wrong)


@pytest.mark.asyncio
async def test_forged_server_signature_is_refused(fake_broker_factory: FakeFactory) -> None:
    broker = await fake_broker_factory(api_ranges=RANGES, handler=SaslBroker(forge=True))
    connection = sasl_connection(broker.port, "SCRAM-SHA-256", PASSWORD)
    with pytest.raises(SaslAuthenticationFailedError, match="server signature"):
        await bounded(connection.connect())
    await connection.close()


@pytest.mark.asyncio
async def test_mechanism_the_listener_lacks_is_named_in_the_error(
    fake_broker_factory: FakeFactory,
) -> None:
    handler = SaslBroker(mechanisms=("PLAIN",))
    broker = await fake_broker_factory(api_ranges=RANGES, handler=handler)
    connection = sasl_connection(broker.port, "SCRAM-SHA-512", PASSWORD)
    with pytest.raises(BrokerError) as caught:
        await bounded(connection.connect())
    await connection.close()
    assert caught.value.name == "UNSUPPORTED_SASL_MECHANISM"
    assert "SCRAM-SHA-512" in str(caught.value)
    assert "PLAIN" in str(caught.value)


def _assert_no_secret(caplog: pytest.LogCaptureFixture, secret: str) -> None:
    for record in caplog.records:
        assert secret not in record.getMessage(), record
        assert secret not in repr(record.args), record
        if record.exc_info and record.exc_info[1] is not None:
            assert secret not in str(record.exc_info[1]), record
