"""The OAUTHBEARER token sources that are not the application's callback, and the choice.

* :class:`OidcTokenSource`: ``sasl.oauthbearer.method=oidc``, the OAuth 2 client-credentials
  grant against ``sasl.oauthbearer.token.endpoint.url`` (HTTP Basic with the client id and
  secret, not URL-encoded, ``grant_type=client_credentials`` and the optional ``scope``, as
  librdkafka and Java send it); the expiry and principal are read from the JWT's ``exp`` and
  ``sub`` (``sasl.oauthbearer.sub.claim.name``) claims, as librdkafka does;
* :class:`UnsecuredJwtSource`: ``enable.sasl.oauthbearer.unsecure.jwt=true``, an unsigned JWT
  built from ``sasl.oauthbearer.config`` (``principal=... lifeSeconds=... scope=...``), for
  brokers with the unsecured validator (development only);
* :func:`token_source` picks one from the settings (``oauth_cb`` first, as confluent-kafka).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from consumer._config.types import Secret
from consumer.config import ConfigError
from consumer.errors import KafkaConnectionError

from .oauth import (
    CallbackTokenSource,
    OAuthBearerToken,
    TokenSource,
    check_token,
    parse_extensions,
)
from .sasl_mechanisms import SaslAuthenticationFailedError, check_oauthbearer_extensions

__all__ = ["OAuthBearerSettings", "OidcTokenSource", "UnsecuredJwtSource", "token_source"]

#: Bound on one token endpoint request.
_HTTP_TIMEOUT_S: Final = 20.0


class _Revealable(Protocol):
    def reveal(self) -> str: ...


class OAuthBearerSettings(Protocol):
    """The OAUTHBEARER part of :class:`~consumer.config.SecurityConfig`."""

    @property
    def oauth_cb(self) -> Callable[..., object] | None: ...
    @property
    def sasl_oauthbearer_config(self) -> _Revealable | None: ...
    @property
    def sasl_oauthbearer_method(self) -> str | None: ...
    @property
    def sasl_oauthbearer_client_id(self) -> str | None: ...
    @property
    def sasl_oauthbearer_client_secret(self) -> _Revealable | None: ...
    @property
    def sasl_oauthbearer_token_endpoint_url(self) -> str | None: ...
    @property
    def sasl_oauthbearer_scope(self) -> str | None: ...
    @property
    def sasl_oauthbearer_extensions(self) -> str | None: ...
    @property
    def sasl_oauthbearer_sub_claim_name(self) -> str | None: ...
    @property
    def enable_sasl_oauthbearer_unsecure_jwt(self) -> bool | None: ...
    @property
    def https_ca_location(self) -> str | None: ...


class OidcTokenSource:
    """OAuth 2 client credentials against a token endpoint (``sasl.oauthbearer.method=oidc``).

    Args:
        endpoint_url: ``sasl.oauthbearer.token.endpoint.url`` (http or https).
        client_id / client_secret: sent with HTTP Basic authentication.
        scope: ``sasl.oauthbearer.scope`` (None: not sent).
        extensions: ``sasl.oauthbearer.extensions``, parsed.
        sub_claim_name: the claim naming the principal (``sasl.oauthbearer.sub.claim.name``).
        ssl_context: for https endpoints (``https.ca.location``; None: system trust store).
    """

    def __init__(
        self,
        endpoint_url: str,
        client_id: str,
        client_secret: Secret,
        *,
        scope: str | None = None,
        extensions: Mapping[str, str] | None = None,
        sub_claim_name: str = "sub",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._url = endpoint_url
        self._client_id = client_id
        self._secret = client_secret
        self._scope = scope
        self._extensions = dict(extensions or {})
        self._sub_claim = sub_claim_name
        self._ssl_context = ssl_context

    def fetch(self) -> OAuthBearerToken:
        """POST the client-credentials grant and read the ``access_token`` of the answer.

        Raises:
            KafkaConnectionError: the endpoint could not be reached or answered 5xx (retried).
            SaslAuthenticationFailedError: the endpoint refused the client (4xx) or answered
                something that is not a token with ``exp`` and the principal claim.
        """
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        basic = base64.b64encode(f"{self._client_id}:{self._secret.reveal()}".encode()).decode()
        request = urllib.request.Request(
            self._url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            method="POST",
        )
        where = f"the token endpoint {self._url}"
        try:
            with urllib.request.urlopen(
                request, timeout=_HTTP_TIMEOUT_S, context=self._ssl_context
            ) as answer:
                body = answer.read()
        except urllib.error.HTTPError as error:
            error.close()
            reason = f"{where} answered HTTP {error.code} for client {self._client_id!r}"
            if error.code >= 500:
                raise KafkaConnectionError(reason) from None
            raise SaslAuthenticationFailedError(reason) from None
        except (urllib.error.URLError, OSError) as error:
            cause = getattr(error, "reason", None) or error
            raise KafkaConnectionError(f"could not reach {where}: {cause}") from None
        try:
            token = json.loads(body)["access_token"]
            if not isinstance(token, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise SaslAuthenticationFailedError(
                f"{where} answered without a JSON 'access_token'"
            ) from None
        claims = _jwt_claims(token, where)
        expiry, principal = claims.get("exp"), claims.get(self._sub_claim)
        if isinstance(expiry, bool) or not isinstance(expiry, int | float):
            raise SaslAuthenticationFailedError(f"the token from {where} has no numeric 'exp'")
        if not isinstance(principal, str) or not principal:
            raise SaslAuthenticationFailedError(
                f"the token from {where} has no '{self._sub_claim}' claim"
            )
        check_token(token, float(expiry), self._extensions)
        return OAuthBearerToken(Secret(token), float(expiry), principal, dict(self._extensions))

    def __repr__(self) -> str:
        return f"<OidcTokenSource {self._url} client={self._client_id!r}>"


class UnsecuredJwtSource:
    """An unsigned JWT built locally (``enable.sasl.oauthbearer.unsecure.jwt=true``).

    ``config`` is librdkafka's ``sasl.oauthbearer.config`` syntax: space-separated
    ``principal=<name>`` (required), ``lifeSeconds=<n>`` (default 3600), ``scope=<a,b>``,
    ``scopeClaimName=<claim>`` (default ``scope``) and ``extension_<name>=<value>``.
    """

    def __init__(self, config: str) -> None:
        self._settings: dict[str, str] = {}
        for word in config.split():
            name, separator, value = word.partition("=")
            if not separator or not value:
                raise ValueError(f"'sasl.oauthbearer.config': {name!r} needs name=value")
            self._settings[name] = value
        if "principal" not in self._settings:
            raise ValueError("'sasl.oauthbearer.config' needs principal=<name> for unsecure JWTs")
        try:
            self._life_s = int(self._settings.get("lifeSeconds", "3600"))
        except ValueError:
            raise ValueError("'sasl.oauthbearer.config': lifeSeconds must be an integer") from None
        self._extensions = {
            name.removeprefix("extension_"): value
            for name, value in self._settings.items()
            if name.startswith("extension_")
        }
        check_oauthbearer_extensions(self._extensions)

    def fetch(self) -> OAuthBearerToken:
        """A new unsigned token valid for ``lifeSeconds``."""
        now = time.time()
        principal = self._settings["principal"]
        claims: dict[str, object] = {"sub": principal, "iat": now, "exp": now + self._life_s}
        if "scope" in self._settings:
            claims[self._settings.get("scopeClaimName", "scope")] = self._settings["scope"].split(
                ","
            )
        token = ".".join((_b64url(json.dumps({"alg": "none"})), _b64url(json.dumps(claims)), ""))
        return OAuthBearerToken(Secret(token), now + self._life_s, principal, self._extensions)

    def __repr__(self) -> str:
        return f"<UnsecuredJwtSource principal={self._settings['principal']!r}>"


def token_source(settings: OAuthBearerSettings) -> TokenSource:
    """Where OAUTHBEARER tokens come from: ``oauth_cb``, OIDC, or an unsecured local JWT."""
    config = settings.sasl_oauthbearer_config
    if settings.oauth_cb is not None:
        return CallbackTokenSource(
            settings.oauth_cb, None if config is None else Secret(config.reveal())
        )
    if (settings.sasl_oauthbearer_method or "").lower() == "oidc":
        url = settings.sasl_oauthbearer_token_endpoint_url
        client_id = settings.sasl_oauthbearer_client_id
        secret = settings.sasl_oauthbearer_client_secret
        for key, value in (
            ("sasl.oauthbearer.token.endpoint.url", url),
            ("sasl.oauthbearer.client.id", client_id),
            ("sasl.oauthbearer.client.secret", secret),
        ):
            if not value:
                raise ConfigError(f"'{key}' is required with sasl.oauthbearer.method=oidc.")
        assert url is not None
        assert client_id is not None
        assert secret is not None
        try:
            extensions = parse_extensions(settings.sasl_oauthbearer_extensions)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        ca = settings.https_ca_location
        return OidcTokenSource(
            url,
            client_id,
            Secret(secret.reveal()),
            scope=settings.sasl_oauthbearer_scope,
            extensions=extensions,
            sub_claim_name=settings.sasl_oauthbearer_sub_claim_name or "sub",
            ssl_context=None if ca is None else _https_context(ca),
        )
    if settings.enable_sasl_oauthbearer_unsecure_jwt:
        try:
            return UnsecuredJwtSource(config.reveal() if config is not None else "")
        except ValueError as error:
            raise ConfigError(str(error)) from None
    raise ConfigError(
        "sasl.mechanism=OAUTHBEARER needs a token source: set 'oauth_cb', "
        "'sasl.oauthbearer.method=oidc' (with its client id, secret and token endpoint), or "
        "'enable.sasl.oauthbearer.unsecure.jwt=true' (development only)."
    )


def _https_context(ca_location: str) -> ssl.SSLContext:
    try:
        if os.path.isdir(ca_location):
            return ssl.create_default_context(capath=ca_location)
        return ssl.create_default_context(cafile=ca_location)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"Invalid value {ca_location!r} for 'https.ca.location': the CA certificates could "
            f"not be loaded ({error.strerror or str(error)})."
        ) from None


def _jwt_claims(token: str, where: str) -> dict[str, object]:
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
        if not isinstance(claims, dict):
            raise ValueError
    except (ValueError, binascii.Error):
        raise SaslAuthenticationFailedError(
            f"the access token from {where} is not a JWT (header.payload.signature)"
        ) from None
    return claims


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
