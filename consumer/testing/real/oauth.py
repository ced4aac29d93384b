"""OAUTHBEARER for the local test broker: listeners, unsigned tokens and a local token endpoint.

The broker validates tokens with Kafka's *unsecured* validator (the default when no server
callback handler is configured): it accepts unsigned JWTs (``alg: none``) with ``sub`` and
``exp`` claims. That is for tests only; what the tests prove is the client side (token sources,
renewal, re-authentication), which is the same against a production validator::

    listeners = [Listener("OAUTH", "SASL_PLAINTEXT", free_port())]
    port, controller = free_port(), free_port()
    overrides = {**listener_overrides(port, controller, listeners),
                 **oauthbearer_listener_settings("OAUTH", max_reauth_ms=3000)}
    with LocalBroker(port=port, overrides=overrides) as broker, TokenEndpoint() as idp:
        config = {"sasl.oauthbearer.method": "oidc",
                  "sasl.oauthbearer.token.endpoint.url": idp.url, ...}

``connections.max.reauth.ms`` (KIP-368) makes the broker give each SASL session a lifetime: the
smaller of that value and the time left on the token. A client that does not re-authenticate
before it ends has its connection closed on its next request.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self

__all__ = [
    "OAUTHBEARER_LOGIN_MODULE",
    "TokenEndpoint",
    "TokenRequest",
    "oauthbearer_listener_settings",
    "unsecured_jwt",
]

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def oauthbearer_listener_settings(listener: str, *, max_reauth_ms: int = 0) -> dict[str, str]:
    """``server.properties`` entries that enable OAUTHBEARER (unsecured validator) on
    ``listener`` (a ``SASL_PLAINTEXT`` or ``SASL_SSL`` listener added with
    :func:`~consumer.testing.real.security.listener_overrides`).

    ``max_reauth_ms`` > 0 sets ``connections.max.reauth.ms`` for OAUTHBEARER on that listener.
    """
    prefix = f"listener.name.{listener.lower()}."
    settings = {
        prefix + "sasl.enabled.mechanisms": "OAUTHBEARER",
        prefix + "oauthbearer.sasl.jaas.config": (
            f'{OAUTHBEARER_LOGIN_MODULE} required unsecuredLoginStringClaim_sub="admin";'
        ),
    }
    if max_reauth_ms > 0:
        settings[prefix + "oauthbearer.connections.max.reauth.ms"] = str(max_reauth_ms)
    return settings


def unsecured_jwt(
    principal: str, lifetime_s: float, *, claims: Mapping[str, object] | None = None
) -> tuple[str, float]:
    """An unsigned JWT for ``principal`` valid for ``lifetime_s``, and its expiry (seconds since
    the epoch), as an ``oauth_cb`` returns them."""
    now = time.time()
    expiry = now + lifetime_s
    payload = {"sub": principal, "iat": int(now), "exp": expiry, **(claims or {})}
    token = f"{_b64url({'alg': 'none'})}.{_b64url(payload)}."
    return token, expiry


def _b64url(document: Mapping[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class TokenRequest:
    """One request the endpoint answered: who asked (User-Agent) and whether it was granted."""

    user_agent: str
    granted: bool
    at_s: float


@dataclass
class TokenEndpoint:
    """A client-credentials token endpoint on 127.0.0.1 that issues unsigned JWTs.

    It accepts ``POST`` with HTTP Basic ``client_id:client_secret`` and
    ``grant_type=client_credentials``, and answers ``{"access_token": <JWT>, "token_type":
    "bearer", "expires_in": lifetime}`` with ``sub`` = ``principal``; anything else gets 401.
    Every request is recorded in :attr:`requests` (User-Agent tells librdkafka from Python).
    """

    oauth_client_id: str = "kafka-client"
    oauth_client_secret: str = "client-secret-for-tests"
    principal: str = "alice"
    lifetime_s: float = 3600.0
    requests: list[TokenRequest] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/token``."""
        assert self._server is not None, "start() the endpoint first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def granted_to(self, user_agent_prefix: str) -> int:
        """How many tokens were issued to clients whose User-Agent starts with the prefix."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if r.granted and r.user_agent.lower().startswith(user_agent_prefix.lower())
            )

    def start(self) -> Self:
        """Serve on a free port in a daemon thread."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                form = self.rfile.read(length).decode()
                expected = base64.b64encode(
                    f"{endpoint.oauth_client_id}:{endpoint.oauth_client_secret}".encode()
                ).decode()
                granted = (
                    self.headers.get("Authorization") == f"Basic {expected}"
                    and "grant_type=client_credentials" in form
                )
                endpoint._record(self.headers.get("User-Agent") or "", granted)
                if not granted:
                    self._answer(401, {"error": "invalid_client"})
                    return
                token, _ = unsecured_jwt(endpoint.principal, endpoint.lifetime_s)
                self._answer(
                    200,
                    {
                        "access_token": token,
                        "token_type": "bearer",
                        "expires_in": int(endpoint.lifetime_s),
                    },
                )

            def _answer(self, status: int, body: Mapping[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                """Quiet: no access log on stderr."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="token-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def _record(self, user_agent: str, granted: bool) -> None:
        with self._lock:
            self.requests.append(TokenRequest(user_agent, granted, time.time()))

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
