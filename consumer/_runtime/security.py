"""TLS and SASL for the control plane (the member's own broker connections).

The data plane (librdkafka) gets the same ``ssl.*`` / ``sasl.*`` keys through
``ConsumerConfig.data_plane``; this module makes the member's asyncio connections authenticate
the same way:

* :func:`build_ssl_context` turns the ``ssl.*`` settings into an :class:`ssl.SSLContext` (CA
  file or directory, optional client certificate and key, host name verification per
  ``ssl.endpoint.identification.algorithm``, ``enable.ssl.certificate.verification``);
* :func:`authenticate` runs SaslHandshake (v1) and SaslAuthenticate (v0-v2) on a freshly
  negotiated connection, and again on the same connection to re-authenticate (KIP-368), with the
  sans-I/O mechanism clients of :mod:`consumer._runtime.sasl_mechanisms` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and OAUTHBEARER, whose tokens come from :mod:`consumer._runtime.oauth`);
* :func:`reauthentication_delay_ms` says when to re-authenticate before the broker's session
  (``SessionLifetimeMs``) ends;
* :class:`ConnectionSecurity` is what a :class:`~consumer._runtime.connection.BrokerConnection`
  holds: the SSL context (built once, shared by every connection of a cluster client) and the
  SASL credentials.

Secrets (``sasl.password``, ``ssl.key.password``) stay in :class:`~consumer.config.Secret`
objects, are revealed only where the bytes are computed, and appear in no ``repr()``, log record
or exception message. Authentication failures raise the broker-code class
:data:`~consumer._runtime.sasl_mechanisms.SaslAuthenticationFailedError`
(``SASL_AUTHENTICATION_FAILED``, 58; not retriable), an unknown mechanism
``UNSUPPORTED_SASL_MECHANISM`` (33) and a listener without SASL ``ILLEGAL_SASL_STATE`` (34): the
member turns these into a FATAL state, raised from ``poll()``.
"""

from __future__ import annotations

import logging
import os
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0 import SaslAuthenticateRequest as SaslAuthenticateRequestV0
from kio.schema.sasl_authenticate.v0 import (
    SaslAuthenticateResponse as SaslAuthenticateResponseV0,
)
from kio.schema.sasl_authenticate.v1 import SaslAuthenticateRequest as SaslAuthenticateRequestV1
from kio.schema.sasl_authenticate.v1 import (
    SaslAuthenticateResponse as SaslAuthenticateResponseV1,
)
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest as SaslAuthenticateRequestV2
from kio.schema.sasl_authenticate.v2 import (
    SaslAuthenticateResponse as SaslAuthenticateResponseV2,
)
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest, SaslHandshakeResponse
from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._config.spec import spec_default
from consumer._config.types import Secret
from consumer._runtime.oauth import OAuthBearerLogin
from consumer._runtime.oauth_sources import OAuthBearerSettings, token_source
from consumer._runtime.sasl_mechanisms import (
    OAuthBearerClient,
    SaslCredentials,
    SaslMechanismClient,
    mechanism_client,
)
from consumer._wire import VersionRange
from consumer.config import ConfigError
from consumer.errors import (
    ProtocolError,
    UnsupportedBrokerError,
    error_for_code,
)

__all__ = [
    "SASL_AUTHENTICATE_API_KEY",
    "SASL_HANDSHAKE_API_KEY",
    "ConnectionSecurity",
    "SaslLogin",
    "SaslSession",
    "SecuritySettings",
    "authenticate",
    "build_ssl_context",
    "connection_security",
    "reauthentication_delay_ms",
]

_log = logging.getLogger(__name__)

SASL_HANDSHAKE_API_KEY: Final = 17
SASL_AUTHENTICATE_API_KEY: Final = 36
#: SaslHandshake v1 is the version after which tokens travel in SaslAuthenticate requests.
_HANDSHAKE_VERSION: Final = 1
_AUTHENTICATE_VERSIONS: Final = VersionRange(0, 2)
#: Re-authenticate between 85 % and 95 % of the session lifetime (Java's window; librdkafka
#: uses 90 %): early enough for latency and clock drift, spread so connections do not all
#: re-authenticate at once.
_REAUTH_WINDOW: Final = (0.85, 0.95)
#: A broker refuses a second re-authentication within one second of the previous one.
_MIN_REAUTH_INTERVAL_MS: Final = 1000

SaslLogin = SaslCredentials | OAuthBearerLogin
"""What a connection authenticates with: a user and password, or an OAUTHBEARER token source."""

# ----------------------------------------------------------------------------------------------
# Settings


class _Revealable(Protocol):
    def reveal(self) -> str: ...


class SecuritySettings(OAuthBearerSettings, Protocol):
    """What :class:`~consumer.config.SecurityConfig` offers; any object with these attributes
    will do (field names are the dotted configuration keys with ``_`` for ``.``)."""

    @property
    def protocol(self) -> str: ...
    @property
    def ssl_ca_location(self) -> str | None: ...
    @property
    def ssl_certificate_location(self) -> str | None: ...
    @property
    def ssl_key_location(self) -> str | None: ...
    @property
    def ssl_key_password(self) -> _Revealable | None: ...
    @property
    def ssl_endpoint_identification_algorithm(self) -> str: ...
    @property
    def enable_ssl_certificate_verification(self) -> bool: ...
    @property
    def sasl_mechanism(self) -> str | None: ...
    @property
    def sasl_username(self) -> str | None: ...
    @property
    def sasl_password(self) -> _Revealable | None: ...


@dataclass(frozen=True, slots=True)
class ConnectionSecurity:
    """TLS and SASL for broker connections; build it with :func:`connection_security`.

    Attributes:
        protocol: ``plaintext``, ``ssl``, ``sasl_plaintext`` or ``sasl_ssl``.
        ssl_context: the context every TLS connection is opened with (None: no TLS).
        sasl: the credentials to authenticate with after connecting (None: no SASL); an
            OAUTHBEARER login is shared by every connection, so they share one token.
    """

    protocol: str = spec_default("security.protocol", str)
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    sasl: SaslLogin | None = None


def connection_security(
    settings: SecuritySettings | ConnectionSecurity | None,
) -> ConnectionSecurity | None:
    """The :class:`ConnectionSecurity` for ``settings`` (None for plaintext or no settings).

    A :class:`ConnectionSecurity` is returned as is, so one SSL context can be shared.

    Raises:
        ConfigError: a file cannot be loaded, the key password is wrong, a SASL setting is
            missing or the mechanism is not implemented. Messages never contain a secret.
    """
    if settings is None or isinstance(settings, ConnectionSecurity):
        return settings
    protocol = settings.protocol.lower()
    if protocol == "plaintext":
        return None
    if protocol not in ("ssl", "sasl_plaintext", "sasl_ssl"):
        raise ConfigError(
            f"Invalid value {settings.protocol!r} for 'security.protocol': expected plaintext, "
            "ssl, sasl_plaintext or sasl_ssl."
        )
    context = build_ssl_context(settings) if protocol in ("ssl", "sasl_ssl") else None
    credentials: SaslLogin | None = None
    if protocol.startswith("sasl_"):
        mechanism = (settings.sasl_mechanism or "").upper()
        if mechanism == "OAUTHBEARER":
            credentials = OAuthBearerLogin(token_source(settings))
        else:
            credentials = _password_credentials(settings, protocol)
    return ConnectionSecurity(protocol=protocol, ssl_context=context, sasl=credentials)


def _password_credentials(settings: SecuritySettings, protocol: str) -> SaslCredentials:
    mechanism, username, password = (
        settings.sasl_mechanism,
        settings.sasl_username,
        settings.sasl_password,
    )
    for key, value in (
        ("sasl.mechanism", mechanism),
        ("sasl.username", username),
        ("sasl.password", password),
    ):
        if value is None:
            raise ConfigError(f"'{key}' is required with security.protocol={protocol}.")
    assert mechanism is not None
    assert username is not None
    assert password is not None
    return SaslCredentials(mechanism.upper(), username, Secret(password.reveal()))


def build_ssl_context(settings: SecuritySettings) -> ssl.SSLContext:
    """An SSL client context (TLS 1.2 or newer) for ``settings``.

    * ``ssl.ca.location``: a PEM file or a directory of hashed certificates; unset (or
      ``probe``): the system's default trust store;
    * ``ssl.certificate.location`` / ``ssl.key.location`` / ``ssl.key.password``: the client
      certificate for mutual TLS (the key may also sit in the certificate file);
    * ``ssl.endpoint.identification.algorithm=none`` turns host name verification off;
    * ``enable.ssl.certificate.verification=false`` turns all verification off (tests only).

    Raises:
        ConfigError: naming the key whose file could not be used.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    ca = settings.ssl_ca_location
    if ca is not None and ca != "probe":
        try:
            if os.path.isdir(ca):
                context.load_verify_locations(capath=ca)
            else:
                context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(
                f"Invalid value {ca!r} for 'ssl.ca.location': the CA certificates could not be "
                f"loaded ({_reason(error)})."
            ) from None
    certificate, key = settings.ssl_certificate_location, settings.ssl_key_location
    if key is not None and certificate is None:
        raise ConfigError(
            "'ssl.key.location' is set but 'ssl.certificate.location' is not: mutual TLS needs "
            "the client certificate too."
        )
    if certificate is not None:
        password = settings.ssl_key_password
        try:
            context.load_cert_chain(
                certificate, key, password=None if password is None else password.reveal
            )
        except (OSError, ssl.SSLError) as error:
            keys = "'ssl.certificate.location'" + (
                " / 'ssl.key.location'" if key is not None else ""
            )
            hint = " (or 'ssl.key.password' does not decrypt the key)" if password else ""
            raise ConfigError(
                f"Invalid value for {keys}: the client certificate and key could not be loaded"
                f"{hint}: {_reason(error)}."
            ) from None
    if not settings.enable_ssl_certificate_verification:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif settings.ssl_endpoint_identification_algorithm.lower() == "none":
        context.check_hostname = False
    return context


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


# ----------------------------------------------------------------------------------------------
# The Kafka exchange


@dataclass(frozen=True, slots=True)
class SaslSession:
    """The outcome of a successful authentication.

    Attributes:
        mechanism: the mechanism used.
        session_lifetime_ms: how long the broker keeps the session (0: no limit; KIP-368).
    """

    mechanism: str
    session_lifetime_ms: int


Send = Callable[[RequestPayload], Awaitable[ResponsePayload]]
"""Sends one request on the connection being authenticated and returns its response."""

_AuthenticateResponse = (
    SaslAuthenticateResponseV0 | SaslAuthenticateResponseV1 | SaslAuthenticateResponseV2
)


async def authenticate(
    send: Send,
    broker_ranges: Mapping[int, VersionRange],
    credentials: SaslLogin,
    address: str,
    *,
    reauthenticating: bool = False,
) -> SaslSession:
    """SaslHandshake v1, then SaslAuthenticate round trips until the mechanism is done.

    Runs right after ApiVersions (which a broker answers before authentication) and before any
    other request; with ``reauthenticating`` it runs again on an authenticated connection
    (KIP-368), with the caller holding other requests back. ``broker_ranges`` is what the broker
    advertised in ApiVersions.

    Raises:
        SaslAuthenticationFailedError: wrong credentials, a refused or unobtainable token, or an
            unverifiable broker.
        BrokerError: ``UNSUPPORTED_SASL_MECHANISM`` or ``ILLEGAL_SASL_STATE`` from the broker.
        UnsupportedBrokerError: the broker lacks SaslHandshake v1 or SaslAuthenticate.
        KafkaConnectionError / KafkaTimeoutError: from ``send`` (or an unreachable token
            endpoint).
    """
    handshake_range = broker_ranges.get(SASL_HANDSHAKE_API_KEY)
    if handshake_range is None or _HANDSHAKE_VERSION not in handshake_range:
        raise UnsupportedBrokerError(
            f"{address} does not offer SaslHandshake v{_HANDSHAKE_VERSION}"
            " (is this listener configured for SASL?)"
        )
    version = _authenticate_version(broker_ranges.get(SASL_AUTHENTICATE_API_KEY), address)
    mechanism = credentials.mechanism
    client, secret, principal = await _mechanism_client(credentials)
    handshake = await send(SaslHandshakeRequest(mechanism=mechanism))
    if not isinstance(handshake, SaslHandshakeResponse):  # pragma: no cover - framing decodes
        raise ProtocolError(f"{address} answered SaslHandshake with {type(handshake).__name__}")
    if handshake.error_code != ErrorCode.none:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise error_for_code(
            int(handshake.error_code),
            f"{address} refused SASL mechanism {mechanism} (it enables: {offered})",
        )
    message = client.step(None)
    lifetime_ms = 0
    while message is not None:
        response = await send(_authenticate_request(version, message))
        if not isinstance(
            response,
            SaslAuthenticateResponseV0 | SaslAuthenticateResponseV1 | SaslAuthenticateResponseV2,
        ):  # pragma: no cover - framing decodes the matching response type
            raise ProtocolError(f"{address} answered SaslAuthenticate with {type(response)}")
        if response.error_code != ErrorCode.none:
            detail = _scrub(response.error_message or "", secret) or "no reason given"
            challenge = getattr(client, "error_challenge", None)
            if challenge:
                detail += f" (token status: {_scrub(challenge, secret)})"
            raise error_for_code(
                int(response.error_code),
                f"{address} refused {mechanism} authentication of {principal!r}: "
                f"{detail.rstrip('.')}",
            )
        lifetime_ms = _session_lifetime_ms(response)
        message = client.step(response.auth_bytes)
    _log.debug(
        "%s to %s as %r with %s (SaslAuthenticate v%d, session lifetime %s)",
        "re-authenticated" if reauthenticating else "authenticated",
        address,
        principal,
        mechanism,
        version,
        f"{lifetime_ms} ms" if lifetime_ms else "unlimited",
    )
    return SaslSession(mechanism=mechanism, session_lifetime_ms=lifetime_ms)


async def _mechanism_client(credentials: SaslLogin) -> tuple[SaslMechanismClient, str, str]:
    """A fresh mechanism client, the secret its errors must not show, and the principal."""
    if isinstance(credentials, OAuthBearerLogin):
        token = await credentials.token()
        client = OAuthBearerClient(token.value, token.principal, token.extensions)
        return client, token.value.reveal(), token.principal
    return mechanism_client(credentials), credentials.password.reveal(), credentials.username


def reauthentication_delay_ms(
    session_lifetime_ms: int, *, jitter: Callable[[], float] = random.random
) -> int | None:
    """When to re-authenticate, in ms after an authentication whose ``SessionLifetimeMs`` is
    ``session_lifetime_ms``: at a random point between 85 % and 95 % of it (Java's window), but
    not within a second of the last one (a broker refuses that). None: the session never
    expires (the broker has no ``connections.max.reauth.ms`` and the token no lifetime cap)."""
    if session_lifetime_ms <= 0:
        return None
    low, high = _REAUTH_WINDOW
    fraction = low + (high - low) * jitter()
    return max(_MIN_REAUTH_INTERVAL_MS, int(session_lifetime_ms * fraction))


def _authenticate_version(offered: VersionRange | None, address: str) -> int:
    if offered is not None:
        for version in range(_AUTHENTICATE_VERSIONS.max_version, -1, -1):
            if version in offered:
                return version
    raise UnsupportedBrokerError(
        f"{address} does not offer SaslAuthenticate {_AUTHENTICATE_VERSIONS}"
        + (f" (it offers {offered})" if offered is not None else "")
    )


def _authenticate_request(version: int, auth_bytes: bytes) -> RequestPayload:
    if version >= 2:
        return SaslAuthenticateRequestV2(auth_bytes=auth_bytes)
    if version == 1:
        return SaslAuthenticateRequestV1(auth_bytes=auth_bytes)
    return SaslAuthenticateRequestV0(auth_bytes=auth_bytes)


def _session_lifetime_ms(response: _AuthenticateResponse) -> int:
    if isinstance(response, SaslAuthenticateResponseV0):
        return 0
    return int(response.session_lifetime.total_seconds() * 1000)


def _scrub(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` masked (brokers should never echo it)."""
    return text.replace(secret, "***") if secret else text
