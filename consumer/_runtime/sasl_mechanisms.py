"""The client side of the SASL mechanisms the member speaks, sans-I/O.

:class:`PlainClient` (RFC 4616), :class:`ScramClient` (RFC 5802 / RFC 7677: SCRAM-SHA-256 and
SCRAM-SHA-512, no channel binding, as Kafka's ``ScramSaslClient``) and
:class:`OAuthBearerClient` (RFC 7628, as Kafka's ``OAuthBearerSaslClient``) only compute bytes; the
SaslHandshake / SaslAuthenticate exchange that carries them is in
:mod:`consumer._runtime.security`. Passwords stay in :class:`~consumer.config.Secret` objects and
are revealed only where the bytes are computed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from kio.schema.errors import ErrorCode

from consumer._config.types import Secret
from consumer.config import ConfigError
from consumer.errors import ERROR_CLASSES, BrokerError

__all__ = [
    "SUPPORTED_MECHANISMS",
    "OAuthBearerClient",
    "PlainClient",
    "SaslAuthenticationFailedError",
    "SaslCredentials",
    "SaslMechanismClient",
    "ScramClient",
    "check_oauthbearer_extensions",
    "mechanism_client",
]

SaslAuthenticationFailedError: Final[type[BrokerError]] = ERROR_CLASSES[
    ErrorCode.sasl_authentication_failed
]
"""``SASL_AUTHENTICATION_FAILED`` (58): wrong credentials, or a broker we could not verify."""

_SCRAM_HASHES: Final[Mapping[str, str]] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SUPPORTED_MECHANISMS: Final = ("PLAIN", *_SCRAM_HASHES)
#: Kafka's floor for SCRAM iterations (``ScramMechanism.minIterations``); fewer is refused, so
#: a rogue broker cannot make the salted password cheap to attack.
_SCRAM_MIN_ITERATIONS: Final = 4096
#: The GS2 header of a client that neither supports nor requests channel binding.
_GS2_HEADER: Final = b"n,,"
#: RFC 7628 separator between the key/value pairs of the OAUTHBEARER client message.
_KVSEP: Final = b"\x01"
_EXTENSION_NAME: Final = re.compile(r"^[A-Za-z]+$")
_EXTENSION_VALUE: Final = re.compile(r"^[\x21-\x7E \t\r\n]+$")


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """A SASL mechanism, user name and password (masked in ``repr()``)."""

    mechanism: str
    username: str
    password: Secret

    def __post_init__(self) -> None:
        if self.mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"Invalid value {self.mechanism!r} for 'sasl.mechanism': expected one of "
                f"{', '.join(SUPPORTED_MECHANISMS)} (the member's connections implement no other)."
            )


class SaslMechanismClient(Protocol):
    """The client side of one SASL exchange.

    ``step(None)`` gives the first message; each later call takes the server's bytes and gives
    the next message, or None once the exchange is complete (after verifying the server).
    """

    mechanism: str

    def step(self, challenge: bytes | None) -> bytes | None: ...


class PlainClient:
    """SASL PLAIN (RFC 4616): one message, ``authzid NUL authcid NUL passwd``, with an empty
    authorization id (Kafka authorizes the authenticated user)."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: Secret) -> None:
        self._username = username
        self._password = password
        self._sent = False

    def step(self, challenge: bytes | None) -> bytes | None:
        """The single client message, then None."""
        if self._sent:
            return None
        self._sent = True
        return b"\0" + self._username.encode() + b"\0" + self._password.reveal().encode()

    def __repr__(self) -> str:
        return f"<PlainClient user={self._username!r}>"


class ScramClient:
    """The client side of SCRAM (RFC 5802) with SHA-256 or SHA-512 (RFC 7677), no channel
    binding, as Kafka's ``ScramSaslClient`` speaks it.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        username / password: the credentials (the password is never stored in clear here).
        nonce: the client nonce; random unless given (tests use the RFC's fixed one).
    """

    def __init__(
        self, mechanism: str, username: str, password: Secret, *, nonce: str | None = None
    ) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ValueError(f"{mechanism!r} is not one of {tuple(_SCRAM_HASHES)}")
        self.mechanism = mechanism
        self._hash = _SCRAM_HASHES[mechanism]
        self._username = username
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._expected_server_signature: bytes | None = None
        self._stage = 0

    def step(self, challenge: bytes | None) -> bytes | None:
        """client-first; then client-final for server-first; then verify server-final."""
        stage, self._stage = self._stage, self._stage + 1
        if stage == 0:
            return self.client_first()
        if challenge is None:
            raise self._failure("the broker sent no SCRAM message")
        if stage == 1:
            return self.client_final(challenge)
        if stage == 2:
            self.verify_server_final(challenge)
            return None
        raise self._failure("the SCRAM exchange is already complete")

    def client_first(self) -> bytes:
        """``n,,n=<user>,r=<client nonce>``."""
        return _GS2_HEADER + self._client_first_bare.encode()

    def client_final(self, server_first: bytes) -> bytes:
        """``c=biws,r=<nonce>,p=<proof>`` for the broker's server-first message."""
        server_first_text = self._decode(server_first, "server-first")
        attributes = _scram_attributes(server_first_text)
        if "e" in attributes:
            raise self._failure(f"the broker refused the first message: {attributes['e']}")
        if "m" in attributes:
            raise self._failure("the broker asks for a mandatory SCRAM extension")
        try:
            nonce, salt_b64, iterations_text = attributes["r"], attributes["s"], attributes["i"]
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_text)
        except (KeyError, ValueError):
            raise self._failure("the broker's server-first message is malformed") from None
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise self._failure("the broker's nonce does not extend the client nonce")
        if iterations < _SCRAM_MIN_ITERATIONS:
            raise self._failure(
                f"the broker asks for {iterations} iterations, fewer than {_SCRAM_MIN_ITERATIONS}"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.reveal().encode(), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        channel_binding = base64.b64encode(_GS2_HEADER).decode()
        without_proof = f"c={channel_binding},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first_text},{without_proof}".encode()
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self._expected_server_signature = self._hmac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check ``v=<server signature>``: proof that the broker knows the salted password.

        Raises:
            SaslAuthenticationFailedError: an ``e=`` error, a malformed message, or a signature
                that does not match (the broker is not the one holding our credentials).
        """
        expected = self._expected_server_signature
        if expected is None:
            raise self._failure("server-final message before server-first")
        attributes = _scram_attributes(self._decode(server_final, "server-final"))
        if "e" in attributes:
            raise self._failure(f"the broker refused the proof: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes["v"], validate=True)
        except (KeyError, ValueError):
            raise self._failure("the broker's server-final message is malformed") from None
        if not hmac.compare_digest(signature, expected):
            raise self._failure(
                "the broker's server signature does not verify: it does not hold this user's "
                "SCRAM credentials (wrong broker, or a man in the middle)"
            )

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def _decode(self, data: bytes, what: str) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failure(f"the broker's {what} message is not UTF-8") from None

    def _failure(self, reason: str) -> BrokerError:
        return SaslAuthenticationFailedError(f"{self.mechanism} for {self._username!r}: {reason}")

    def __repr__(self) -> str:
        return f"<ScramClient {self.mechanism} user={self._username!r}>"


class OAuthBearerClient:
    """SASL OAUTHBEARER (RFC 7628) as Kafka speaks it: one client message
    ``n,,<kvsep>auth=Bearer <token><kvsep>[<name>=<value><kvsep>]*<kvsep>``.

    On success the broker answers with no bytes. On failure it sends an error challenge (JSON
    with a ``status``) which the client acknowledges with a lone ``<kvsep>``; the broker then
    ends the exchange with ``SASL_AUTHENTICATION_FAILED``.
    """

    mechanism = "OAUTHBEARER"

    def __init__(
        self, token: Secret, principal: str = "", extensions: Mapping[str, str] | None = None
    ) -> None:
        self._token = token
        self._principal = principal
        self._extensions = dict(extensions or {})
        check_oauthbearer_extensions(self._extensions)
        self._sent = False
        self.error_challenge: str | None = None
        """The broker's error challenge (its ``status`` JSON), if it sent one."""

    def step(self, challenge: bytes | None) -> bytes | None:
        """The client message; then ``<kvsep>`` for an error challenge, or None when done."""
        if not self._sent:
            self._sent = True
            pairs = [f"auth=Bearer {self._token.reveal()}".encode()]
            pairs += [f"{name}={value}".encode() for name, value in self._extensions.items()]
            return _GS2_HEADER + _KVSEP + _KVSEP.join(pairs) + _KVSEP + _KVSEP
        if challenge:
            self.error_challenge = challenge.decode("utf-8", errors="replace")
            return _KVSEP
        return None

    def __repr__(self) -> str:
        return f"<OAuthBearerClient principal={self._principal!r}>"


def check_oauthbearer_extensions(extensions: Mapping[str, str]) -> None:
    """RFC 7628 section 3.1: names are ALPHA, values VCHAR/space/tab/CR/LF; ``auth`` is taken.

    Raises:
        ValueError: naming the offending extension.
    """
    for name, value in extensions.items():
        if name == "auth" or not _EXTENSION_NAME.match(name):
            raise ValueError(f"SASL extension name {name!r}: expected letters only, and not 'auth'")
        if not _EXTENSION_VALUE.match(value):
            raise ValueError(
                f"SASL extension {name!r}: the value must be printable ASCII (RFC 7628)"
            )


def _saslname(username: str) -> str:
    """RFC 5802 ``saslname``: ``=`` and ``,`` escaped as ``=3D`` and ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _scram_attributes(message: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}`` (values may contain ``=``)."""
    attributes: dict[str, str] = {}
    for part in message.split(","):
        name, separator, value = part.partition("=")
        if separator and len(name) == 1:
            attributes.setdefault(name, value)
    return attributes


def mechanism_client(credentials: SaslCredentials) -> SaslMechanismClient:
    """A fresh mechanism client for one authentication."""
    if credentials.mechanism == "PLAIN":
        return PlainClient(credentials.username, credentials.password)
    return ScramClient(credentials.mechanism, credentials.username, credentials.password)
