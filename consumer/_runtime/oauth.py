"""OAUTHBEARER tokens for the member's own connections: the token, the callback source, renewal.

* :class:`CallbackTokenSource`: the application's ``oauth_cb``, with confluent-kafka's contract:
  called with the ``sasl.oauthbearer.config`` string, it returns
  ``(token, expiry_seconds_since_epoch[, principal[, extensions]])``; the other sources (OIDC
  client credentials, unsecured JWTs) are in :mod:`consumer._runtime.oauth_sources`.
* :class:`OAuthBearerLogin` keeps one token per client and renews it once 80 % of its lifetime
  has passed (librdkafka's rule); a failed renewal keeps the still-valid token and is tried again
  after 10 s (librdkafka's pause). Sources block (user code, HTTP), so they run in a worker thread
  of the background loop's default executor (``asyncio.to_thread``): a slow callback or token
  endpoint never delays a heartbeat.

Tokens and secrets stay in :class:`~consumer.config.Secret` objects and appear in no ``repr()``
or log record.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from consumer._config.types import Secret
from consumer._logging import routed_logger
from consumer.errors import KafkaConnectionError

from .sasl_mechanisms import SaslAuthenticationFailedError, check_oauthbearer_extensions

__all__ = [
    "REFRESH_FRACTION",
    "RETRY_AFTER_FAILURE_S",
    "CallbackTokenSource",
    "OAuthBearerLogin",
    "OAuthBearerToken",
    "TokenSource",
    "check_token",
    "parse_extensions",
]

_log = routed_logger(__name__)

#: Renew a token once this fraction of its lifetime has passed (librdkafka: 80 %).
REFRESH_FRACTION: Final = 0.8
#: After a failed renewal, the next attempt waits this long (librdkafka: 10 s).
RETRY_AFTER_FAILURE_S: Final = 10.0


@dataclass(frozen=True)
class OAuthBearerToken:
    """One token: the compact JWS (masked in ``repr()``), its expiry and who it names.

    Attributes:
        value: the token, as sent in ``auth=Bearer <value>``.
        expiry_s: when it expires, in seconds since the epoch.
        principal: the principal name, for messages.
        extensions: SASL extensions (RFC 7628) sent with the token.
        obtained_s: when it was obtained (seconds since the epoch).
    """

    value: Secret
    expiry_s: float
    principal: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)
    obtained_s: float = field(default_factory=time.time)

    @property
    def refresh_at_s(self) -> float:
        """When 80 % of the lifetime has passed: the time to get a new token."""
        return self.obtained_s + REFRESH_FRACTION * max(0.0, self.expiry_s - self.obtained_s)


class TokenSource(Protocol):
    """Gets a fresh token; blocking (runs in a worker thread)."""

    def fetch(self) -> OAuthBearerToken: ...


class CallbackTokenSource:
    """The application's ``oauth_cb(oauthbearer_config)`` (confluent-kafka's contract)."""

    def __init__(self, callback: Callable[..., object], config: Secret | None) -> None:
        self._callback = callback
        self._config = config

    def fetch(self) -> OAuthBearerToken:
        """Call ``oauth_cb`` and check what it returned.

        Raises:
            SaslAuthenticationFailedError: the callback raised or returned something else than
                ``(str, float[, str[, dict]])``.
        """
        argument = self._config.reveal() if self._config is not None else None
        try:
            result = self._callback(argument)
        except Exception as error:  # noqa: BLE001 - any failure of user code is reported
            raise SaslAuthenticationFailedError(
                f"oauth_cb raised {type(error).__name__}: {error}"
            ) from None
        shape = (
            "expected oauth_cb to return (token_str, expiry_time[, principal, extensions]), got "
        )
        if not isinstance(result, tuple) or not 2 <= len(result) <= 4:
            raise SaslAuthenticationFailedError(shape + type(result).__name__)
        token, expiry, *rest = result
        principal = rest[0] if rest else ""
        extensions = rest[1] if len(rest) > 1 else {}
        if (
            not isinstance(token, str)
            or isinstance(expiry, bool)
            or not isinstance(expiry, int | float)
            or not isinstance(principal, str)
            or not isinstance(extensions, Mapping)
        ):
            kinds = ", ".join(type(item).__name__ for item in result)
            raise SaslAuthenticationFailedError(f"{shape}({kinds})")
        checked = {str(key): str(value) for key, value in extensions.items()}
        check_token(token, float(expiry), checked)
        return OAuthBearerToken(Secret(token), float(expiry), principal, checked)

    def __repr__(self) -> str:
        return f"<CallbackTokenSource {getattr(self._callback, '__qualname__', 'oauth_cb')}>"


class OAuthBearerLogin:
    """The OAUTHBEARER credentials of one client: a token source and the current token.

    Every connection of the client asks :meth:`token` before authenticating; only one fetch runs
    at a time, and a token younger than 80 % of its lifetime is reused.
    """

    mechanism: Final = "OAUTHBEARER"

    def __init__(self, source: TokenSource, *, clock: Callable[[], float] = time.time) -> None:
        self._source = source
        self._clock = clock
        self._token: OAuthBearerToken | None = None
        self._retry_at_s = 0.0
        self._lock: asyncio.Lock | None = None

    @property
    def username(self) -> str:
        """The current token's principal (for messages; empty before the first token)."""
        return self._token.principal if self._token is not None else ""

    async def token(self) -> OAuthBearerToken:
        """A token valid now: the current one, or a new one from the source.

        Raises:
            SaslAuthenticationFailedError / KafkaConnectionError: no valid token could be had
                (the source's error).
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = self._clock()
            current = self._token
            if current is not None and now < current.refresh_at_s:
                return current
            if current is not None and now < current.expiry_s and now < self._retry_at_s:
                return current
            try:
                fresh = await asyncio.to_thread(self._source.fetch)
            except (SaslAuthenticationFailedError, KafkaConnectionError) as error:
                if current is None or self._clock() >= current.expiry_s:
                    raise
                self._retry_at_s = self._clock() + RETRY_AFTER_FAILURE_S
                _log.warning(
                    "could not renew the OAUTHBEARER token (%s); the current one stays valid "
                    "for %.0f s, next attempt in %.0f s",
                    error,
                    current.expiry_s - self._clock(),
                    RETRY_AFTER_FAILURE_S,
                )
                return current
            self._token = fresh
            _log.debug(
                "new OAUTHBEARER token for %r, valid for %.1f s",
                fresh.principal,
                fresh.expiry_s - self._clock(),
            )
            return fresh

    def __repr__(self) -> str:
        return f"<OAuthBearerLogin {self._source!r}>"


def parse_extensions(text: str | None) -> dict[str, str]:
    """``sasl.oauthbearer.extensions`` (``k=v,k=v``) as a dict, checked as RFC 7628 asks.

    Raises:
        ValueError: an entry is not ``name=value`` or breaks RFC 7628's character rules.
    """
    extensions: dict[str, str] = {}
    for entry in (text or "").split(","):
        if not entry.strip():
            continue
        name, separator, value = entry.partition("=")
        if not separator:
            raise ValueError(f"'sasl.oauthbearer.extensions': {entry!r} is not name=value")
        extensions[name.strip()] = value
    check_oauthbearer_extensions(extensions)
    return extensions


def check_token(token: str, expiry_s: float, extensions: Mapping[str, str]) -> None:
    """Refuse a token Kafka would refuse: not a bearer token, expired, bad extensions."""
    if not _TOKEN_CHARS.match(token):
        raise SaslAuthenticationFailedError(
            "the OAUTHBEARER token is empty or holds characters a bearer token may not"
        )
    if expiry_s <= time.time():
        raise SaslAuthenticationFailedError(
            f"the OAUTHBEARER token expired {time.time() - expiry_s:.0f} s ago"
        )
    try:
        check_oauthbearer_extensions(extensions)
    except ValueError as error:
        raise SaslAuthenticationFailedError(str(error)) from None


#: RFC 6750 ``b64token``, which is what Kafka's OAUTHBEARER server accepts.
_TOKEN_CHARS: Final = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
