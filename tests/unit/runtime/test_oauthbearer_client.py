"""OAUTHBEARER on the member's connections, without a broker: the RFC 7628 message, the
``oauth_cb`` contract, token renewal at 80 % with a manual clock, the OIDC client-credentials
request against a local endpoint, the configuration rules, and KIP-368 re-authentication on one
connection to a fake broker. Every network wait is bounded; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataResponse
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest, SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest, SaslHandshakeResponse
from kio.static.primitive import i64Timedelta
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from consumer._config.types import Secret
from consumer._runtime.connection import BrokerConnection
from consumer._runtime.oauth import (
    CallbackTokenSource,
    OAuthBearerLogin,
    OAuthBearerToken,
    parse_extensions,
)
from consumer._runtime.oauth_sources import OidcTokenSource, UnsecuredJwtSource
from consumer._runtime.retry import CONNECT_RETRY
from consumer._runtime.sasl_mechanisms import OAuthBearerClient, SaslAuthenticationFailedError
from consumer._runtime.security import (
    ConnectionSecurity,
    connection_security,
    reauthentication_delay_ms,
)
from consumer._wire import build_metadata_request
from consumer._wire._units import i32_timedelta_from_ms
from consumer.config import ConfigError, parse_config
from consumer.errors import KafkaConnectionError
from consumer.testing.real.oauth import TokenEndpoint, unsecured_jwt

BOUND_S = 10.0
SECRET = "client-Secret-77"
BASE = {
    "bootstrap.servers": "127.0.0.1:9092",
    "group.id": "g",
    "security.protocol": "sasl_plaintext",
    "sasl.mechanism": "OAUTHBEARER",
}
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


# ----------------------------------------------------------------------------------------------
# The mechanism


def test_client_message_is_rfc7628_as_kafka_reads_it() -> None:
    client = OAuthBearerClient(Secret("abc.def.ghi"), "alice", {"traceId": "t1", "x": "y z"})
    first = client.step(None)
    assert first == b"n,,\x01auth=Bearer abc.def.ghi\x01traceId=t1\x01x=y z\x01\x01"
    assert client.step(b"") is None  # success: the broker sends nothing back
    assert "abc.def.ghi" not in repr(client)


def test_error_challenge_is_acknowledged_and_kept_for_the_message() -> None:
    client = OAuthBearerClient(Secret("tok"))
    client.step(None)
    assert client.step(b'{"status":"invalid_token"}') == b"\x01"
    assert client.error_challenge == '{"status":"invalid_token"}'


@pytest.mark.parametrize(
    ("extensions", "reason"),
    [({"auth": "x"}, "not 'auth'"), ({"a1": "x"}, "letters only"), ({"a": "\x00"}, "printable")],
)
def test_extensions_breaking_rfc7628_are_refused(extensions: dict[str, str], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        OAuthBearerClient(Secret("tok"), extensions=extensions)


def test_extensions_setting_is_parsed() -> None:
    assert parse_extensions("traceId=abc,logicalCluster=lkc-1") == {
        "traceId": "abc",
        "logicalCluster": "lkc-1",
    }
    with pytest.raises(ValueError, match="name=value"):
        parse_extensions("novalue")


# ----------------------------------------------------------------------------------------------
# oauth_cb (confluent-kafka's contract)


def test_callback_gets_the_config_string_and_may_omit_principal_and_extensions() -> None:
    seen: list[str | None] = []

    def oauth_cb(config: str | None) -> tuple[str, float]:
        seen.append(config)
        return unsecured_jwt("alice", 60)

    token = CallbackTokenSource(oauth_cb, Secret("scope=x")).fetch()
    assert seen == ["scope=x"]
    assert token.principal == ""
    assert token.extensions == {}
    assert token.value.reveal() not in repr(token)


@pytest.mark.parametrize(
    ("returned", "match"),
    [
        ("just-a-token", "expected oauth_cb to return"),
        (("tok",), "expected oauth_cb to return"),
        ((b"tok", 2e9), r"\(bytes, float\)"),
        (("tok", "tomorrow"), r"\(str, str\)"),
        (("tok", 1.0, "alice"), "expired"),
        (("two words", 2e9), "characters a bearer token may not"),
    ],
)
def test_callback_results_confluent_refuses_are_refused(returned: object, match: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match=match):
        CallbackTokenSource(lambda config: returned, None).fetch()


def test_a_raising_callback_is_an_authentication_failure() -> None:
    def oauth_cb(config: str | None) -> tuple[str, float]:
        raise RuntimeError("identity provider down")

    with pytest.raises(SaslAuthenticationFailedError, match="RuntimeError: identity provider"):
        CallbackTokenSource(oauth_cb, None).fetch()


# ----------------------------------------------------------------------------------------------
# Renewal


@dataclass
class ScriptedSource:
    """Tokens valid for ``lifetime_s`` on the manual clock, or the queued failures."""

    clock: list[float]
    lifetime_s: float = 100.0
    failures: list[Exception] = field(default_factory=list)
    fetched: int = 0

    def fetch(self) -> OAuthBearerToken:
        if self.failures:
            raise self.failures.pop(0)
        self.fetched += 1
        now = self.clock[0]
        return OAuthBearerToken(
            Secret(f"tok{self.fetched}"), now + self.lifetime_s, "alice", obtained_s=now
        )


@pytest.mark.asyncio
async def test_token_is_reused_until_80_percent_of_its_lifetime() -> None:
    clock = [1000.0]
    source = ScriptedSource(clock)
    login = OAuthBearerLogin(source, clock=lambda: clock[0])
    first = await login.token()
    clock[0] = 1079.9
    assert await login.token() is first
    clock[0] = 1080.0
    second = await login.token()
    assert second.value.reveal() == "tok2"
    assert source.fetched == 2


@pytest.mark.asyncio
async def test_failed_renewal_keeps_the_valid_token_and_retries_after_10s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [0.0]
    source = ScriptedSource(clock)
    login = OAuthBearerLogin(source, clock=lambda: clock[0])
    first = await login.token()
    source.failures.append(KafkaConnectionError("token endpoint unreachable"))
    clock[0] = 85.0
    assert await login.token() is first  # renewal failed; still valid for 15 s
    clock[0] = 94.0
    assert await login.token() is first  # within the 10 s pause: no new attempt
    assert source.fetched == 1
    clock[0] = 95.0
    assert (await login.token()).value.reveal() == "tok2"
    assert any("could not renew" in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_failure_without_a_valid_token_is_raised() -> None:
    clock = [0.0]
    source = ScriptedSource(clock, failures=[SaslAuthenticationFailedError("refused")])
    with pytest.raises(SaslAuthenticationFailedError, match="refused"):
        await OAuthBearerLogin(source, clock=lambda: clock[0]).token()


def test_unsecured_jwt_source_builds_librdkafka_style_tokens() -> None:
    token = UnsecuredJwtSource("principal=bob lifeSeconds=30 scope=a,b extension_k=v").fetch()
    header, payload, signature = token.value.reveal().split(".")
    assert signature == ""
    claims = json.loads(_b64decode(payload))
    assert json.loads(_b64decode(header)) == {"alg": "none"}
    assert claims["sub"] == "bob"
    assert claims["scope"] == ["a", "b"]
    assert claims["exp"] - claims["iat"] == 30
    assert token.extensions == {"k": "v"}


def _b64decode(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ----------------------------------------------------------------------------------------------
# OIDC client credentials (a local HTTP endpoint)


def test_oidc_source_fetches_a_token_with_client_credentials() -> None:
    with TokenEndpoint(oauth_client_secret=SECRET, lifetime_s=60) as endpoint:
        source = OidcTokenSource(
            endpoint.url,
            endpoint.oauth_client_id,
            Secret(SECRET),
            scope="kafka",
            extensions={"a": "b"},
        )
        token = source.fetch()
        assert SECRET not in repr(source)
    assert token.principal == "alice"
    assert 55 < token.expiry_s - token.obtained_s <= 61
    assert token.extensions == {"a": "b"}
    assert [r.granted for r in endpoint.requests] == [True]


def test_oidc_refusal_is_an_authentication_failure_without_the_secret() -> None:
    with TokenEndpoint(oauth_client_secret=SECRET) as endpoint:
        source = OidcTokenSource(endpoint.url, endpoint.oauth_client_id, Secret("wrong-" + SECRET))
        with pytest.raises(SaslAuthenticationFailedError, match="HTTP 401") as caught:
            source.fetch()
    assert SECRET not in str(caught.value)


def test_unreachable_oidc_endpoint_is_a_connection_error() -> None:
    with TokenEndpoint() as endpoint:
        url = endpoint.url
    with pytest.raises(KafkaConnectionError, match="could not reach the token endpoint"):
        OidcTokenSource(url, "c", Secret(SECRET)).fetch()


# ----------------------------------------------------------------------------------------------
# Configuration


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "needs a token source"),
        ({"sasl.oauthbearer.method": "oidc"}, "'sasl.oauthbearer.client.id' is required"),
        (
            {"sasl.oauthbearer.method": "oidc", "enable.sasl.oauthbearer.unsecure.jwt": True},
            "mutually exclusive",
        ),
        ({"enable.sasl.oauthbearer.unsecure.jwt": True}, "'sasl.oauthbearer.config' is required"),
        ({"sasl.oauthbearer.grant.type": "client_credentials"}, "not accepted"),
    ],
)
def test_oauthbearer_config_rules(extra: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, **extra})


def test_oidc_settings_reach_both_planes_and_no_repr_shows_the_secret() -> None:
    config = parse_config(
        {
            **BASE,
            "sasl.oauthbearer.method": "OIDC",
            "sasl.oauthbearer.client.credentials.client.id": "cid",
            "sasl.oauthbearer.client.credentials.client.secret": SECRET,
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
            "sasl.oauthbearer.config": "config-" + SECRET,
        }
    )
    assert config.data_plane["sasl.oauthbearer.client.secret"] == SECRET
    assert config.data_plane["sasl.oauthbearer.method"] == "oidc"
    security = connection_security(config.security)
    assert security is not None
    for thing in (config, config.security, config.data_plane, security, security.sasl):
        assert SECRET not in repr(thing), thing


def test_oauth_cb_is_forwarded_to_the_data_plane() -> None:
    def oauth_cb(config: str | None) -> tuple[str, float]:
        return unsecured_jwt("alice", 60)

    config = parse_config({**BASE, "oauth_cb": oauth_cb})
    assert config.data_plane["oauth_cb"] is oauth_cb
    assert config.security.oauth_cb is oauth_cb


# ----------------------------------------------------------------------------------------------
# KIP-368 re-authentication


def test_reauthentication_time_is_85_to_95_percent_and_never_within_a_second() -> None:
    assert reauthentication_delay_ms(0) is None
    assert reauthentication_delay_ms(10_000, jitter=lambda: 0.0) == 8_500
    assert reauthentication_delay_ms(10_000, jitter=lambda: 1.0) == 9_500
    assert reauthentication_delay_ms(500, jitter=lambda: 0.5) == 1_000


@dataclass
class OAuthBroker:
    """Handler for FakeBroker: OAUTHBEARER sessions with a lifetime, then Metadata."""

    lifetime_ms: int = 1_200
    accept: bool = True
    order: list[str] = field(default_factory=list)
    tokens: list[bytes] = field(default_factory=list)
    third_handshake: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        if isinstance(request, SaslHandshakeRequest):
            self.order.append("handshake")
            if self.order.count("handshake") == 3:
                self.third_handshake.set()
            return SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=("OAUTHBEARER",))
        if isinstance(request, SaslAuthenticateRequest):
            self.order.append("authenticate")
            self.tokens.append(request.auth_bytes)
            error = ErrorCode.none if self.accept else ErrorCode.sasl_authentication_failed
            return SaslAuthenticateResponse(
                error_code=error,
                error_message=None if self.accept else "Authentication failed",
                auth_bytes=b"",
                session_lifetime=i64Timedelta.parse(
                    datetime.timedelta(milliseconds=self.lifetime_ms)
                ),
            )
        self.order.append("metadata")
        return MetadataResponse(
            throttle_time=i32_timedelta_from_ms(0), brokers=(), cluster_id="c", topics=()
        )


@pytest.mark.asyncio
async def test_connection_reauthenticates_in_place_before_the_session_ends(
    fake_broker_factory: Callable[..., Awaitable[Any]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    handler = OAuthBroker()
    broker = await fake_broker_factory(api_ranges=RANGES, handler=handler)
    calls: list[str | None] = []

    def oauth_cb(config: str | None) -> tuple[str, float, str]:
        calls.append(config)
        token, expiry = unsecured_jwt("alice", 3600)
        return token, expiry, "alice"

    security = ConnectionSecurity(
        protocol="sasl_plaintext", sasl=OAuthBearerLogin(CallbackTokenSource(oauth_cb, None))
    )
    connection = BrokerConnection(
        "127.0.0.1", broker.port, request_timeout_ms=2_000, retry_policy=CONNECT_RETRY,
        security=security,
    )  # fmt: skip
    try:
        await asyncio.wait_for(connection.request(build_metadata_request(12, ())), BOUND_S)
        # Two re-authentications (each at 85-95 % of 1.2 s, at least 1 s apart) on one socket.
        await asyncio.wait_for(handler.third_handshake.wait(), BOUND_S)
        await asyncio.wait_for(connection.request(build_metadata_request(12, ())), BOUND_S)
    finally:
        await connection.close()
    assert broker.connections == 1
    assert handler.order[:3] == ["handshake", "authenticate", "metadata"]
    assert handler.order[3:5] == ["handshake", "authenticate"]
    assert calls == [None]  # one token, still fresh, reused by every re-authentication
    assert sum("re-authenticated to" in r.getMessage() for r in caplog.records) >= 2
    token = handler.tokens[0].split(b"auth=Bearer ")[1].split(b"\x01")[0].decode()
    assert all(token not in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_failed_reauthentication_drops_the_session_and_the_next_request_fails_clearly(
    fake_broker_factory: Callable[..., Awaitable[Any]],
) -> None:
    handler = OAuthBroker()
    broker = await fake_broker_factory(api_ranges=RANGES, handler=handler)
    security = ConnectionSecurity(
        protocol="sasl_plaintext",
        sasl=OAuthBearerLogin(UnsecuredJwtSource("principal=alice")),
    )
    connection = BrokerConnection(
        "127.0.0.1", broker.port, request_timeout_ms=2_000, retry_policy=CONNECT_RETRY,
        security=security,
    )  # fmt: skip
    try:
        await asyncio.wait_for(connection.request(build_metadata_request(12, ())), BOUND_S)
        handler.accept = False  # the broker now refuses the token
        session = connection._session  # white-box: await the re-authentication that fails
        assert session is not None
        assert session.reauth_task is not None
        await asyncio.wait_for(session.reauth_task, BOUND_S)
        assert not connection.is_connected
        with pytest.raises(SaslAuthenticationFailedError, match="OAUTHBEARER authentication"):
            await asyncio.wait_for(connection.request(build_metadata_request(12, ())), BOUND_S)
    finally:
        await connection.close()
