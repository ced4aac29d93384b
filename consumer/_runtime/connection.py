"""An asyncio connection to one Kafka broker.

One :class:`BrokerConnection` owns at most one TCP session at a time. A session is opened on
first use (with the connect retry policy) and negotiates API versions with ApiVersions; it is an
:class:`asyncio.Protocol` (:mod:`consumer._runtime.session`) that hands each response frame to
whatever waits for its correlation id, so several requests may be in flight at once.
:meth:`BrokerConnection.request` awaits the answer; :meth:`BrokerConnection.request_soon` (an
idle member's heartbeat) writes the frame at once and gets the answer through a callback, with
a timer for its timeout: no task at all.

With a ``security`` setting (:mod:`consumer._runtime.security`) the TCP session is wrapped in TLS,
and SASL (SaslHandshake, SaslAuthenticate) runs right after ApiVersions, before any other
request, on every (re)connect. Authentication failures are not retried: they raise the broker's
error class (``SASL_AUTHENTICATION_FAILED`` and the like), whose message holds no secret. When the
broker gives the session a lifetime (KIP-368: ``connections.max.reauth.ms``, or an OAUTHBEARER
token's expiry), the connection re-authenticates on the same socket before it ends (between 85 %
and 95 % of it, as Java does), holding new requests back meanwhile; a failed re-authentication
drops the session, and the next request reconnects.

Failure rules:

* a request that gets no response within its timeout fails with :class:`KafkaTimeoutError`, and
  the session is dropped (the position in the byte stream is no longer trustworthy);
* bytes that are not Kafka frames fail every in-flight request with :class:`ProtocolError` and
  drop the session;
* a closed or reset socket fails every in-flight request with :class:`KafkaConnectionError`;
* after a drop, the next request opens a new session. In-flight requests are never re-sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Final

from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._config.spec import spec_default
from consumer._logging import routed_logger
from consumer._version import __version__
from consumer._wire import (
    ALL_GROUP_APIS,
    DEFAULT_MAX_FRAME_BYTES,
    SUPPORTED_VERSIONS,
    ApiKey,
    NegotiatedVersions,
    api_label,
    build_api_versions_request,
    decode_api_versions_frame,
    decode_response_frame,
    encode_request_frame,
    negotiate_versions,
    parse_api_versions_response,
    response_type_for,
    retry_version_after_unsupported,
)
from consumer.errors import (
    ConsumerError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedBrokerError,
)

from .answer_waiter import AnswerWaiter
from .closing import AsyncClosing
from .frame_cache import FrameCache
from .retry import CONNECT_RETRY, RetryPolicy, call_with_retry
from .security import (
    ConnectionSecurity,
    SecuritySettings,
    authenticate,
    connection_security,
    reauthentication_delay_ms,
)
from .session import Session, copy_error

__all__ = [
    "DEFAULT_CLIENT_ID",
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_REQUEST_TIMEOUT_MS",
    "BrokerConnection",
]

_log = routed_logger(__name__)

#: Defaults of a bare connection: the key table's (a consumer passes its configured values).
DEFAULT_CLIENT_ID: Final = spec_default("client.id", str)
DEFAULT_CONNECT_TIMEOUT_MS: Final = spec_default("socket.connection.setup.timeout.ms", int)
DEFAULT_REQUEST_TIMEOUT_MS: Final = spec_default("socket.timeout.ms", int)


class BrokerConnection(AsyncClosing):
    """A connection to one broker; see the module docstring for the failure rules.

    Args:
        host: broker host name or address.
        port: broker port.
        client_id: sent in every request header.
        node_id: the broker's node id, if known (informational).
        connect_timeout_ms: bound on one TCP connect attempt.
        request_timeout_ms: default bound on one request, ApiVersions included.
        retry_policy: how connect attempts are retried (refused, unreachable, closed).
        required_apis: APIs the broker must offer; checked right after ApiVersions.
        max_frame_bytes: largest response frame accepted.
        security: TLS and SASL settings (a ``SecurityConfig`` or a prepared
            :class:`~consumer._runtime.security.ConnectionSecurity`); None: plaintext.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        node_id: int | None = None,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        retry_policy: RetryPolicy = CONNECT_RETRY,
        required_apis: Iterable[ApiKey] = ALL_GROUP_APIS,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        security: SecuritySettings | ConnectionSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self._client_id = client_id
        self._connect_timeout_ms = connect_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._retry_policy = retry_policy
        self._required_apis = frozenset(required_apis)
        self._max_frame_bytes = max_frame_bytes
        self._security = connection_security(security)
        self._session: Session | None = None
        #: Repeated requests and responses (an idle member's heartbeats) coded once.
        self._frames = FrameCache()
        self._connect_lock = asyncio.Lock()
        self._closed = False

    @property
    def address(self) -> str:
        """``host:port`` (with the node id when known), for messages."""
        text = f"{self.host}:{self.port}"
        return text if self.node_id is None else f"{text} (node {self.node_id})"

    @property
    def is_connected(self) -> bool:
        """Whether a negotiated session is open right now."""
        return self._session is not None and self._session.alive

    @property
    def versions(self) -> NegotiatedVersions:
        """The versions negotiated on the current session.

        Raises:
            KafkaConnectionError: not connected.
        """
        session = self._session
        if session is None or session.versions is None or not session.alive:
            raise KafkaConnectionError(f"not connected to {self.address}")
        return session.versions

    def use_security(self, security: ConnectionSecurity) -> None:
        """Use ``security`` for the next sessions (TLS and SASL happen when connecting: an
        open session is not affected)."""
        self._security = security

    def api_version(self, api_key: ApiKey) -> int:
        """The negotiated version of ``api_key`` (raises UnsupportedBrokerError if none)."""
        return self.versions.version_for(api_key)

    async def connect(self) -> NegotiatedVersions:
        """Open a session now if there is none (retrying per policy); return its versions.

        Raises:
            KafkaConnectionError: unreachable, refused or closed, after the retries.
            KafkaTimeoutError: the broker accepted but did not answer ApiVersions in time.
            ProtocolError: the peer does not speak Kafka.
            UnsupportedBrokerError: a required API is missing (e.g. no KIP-848).
        """
        session = await self._ensure_session()
        assert session.versions is not None
        return session.versions

    async def request(
        self, request: RequestPayload, *, timeout_ms: int | None = None
    ) -> ResponsePayload:
        """Send ``request`` and return the broker's response, decoded with the matching schema.

        The request's version must be one the broker advertised (use :meth:`api_version`).

        Raises:
            KafkaTimeoutError: no response within ``timeout_ms`` (the session is dropped).
            KafkaConnectionError: the connection failed or was closed.
            ProtocolError: the response could not be decoded (the session is dropped).
            UnsupportedBrokerError: the broker does not offer this API version.
        """
        session = await self._ensure_session()
        assert session.versions is not None
        api_key = int(request.__api_key__)
        version = int(request.__version__)
        offered = session.versions.broker_ranges.get(api_key)
        if offered is None or version not in offered:
            raise UnsupportedBrokerError(
                f"{self.address} does not support {api_label(api_key)} v{version}"
                + (f" (it offers {offered})" if offered is not None else " (not offered)")
            )
        frame = await self._exchange(session, request, timeout_ms)
        try:
            response = self._frames.response(frame, response_type_for(type(request)))
        except ProtocolError as error:
            await self._drop(session, error)
            raise
        return response

    def request_soon(
        self,
        build: Callable[[NegotiatedVersions], RequestPayload],
        on_answer: Callable[[ResponsePayload | ConsumerError], None],
        *,
        timeout_ms: int | None = None,
    ) -> bool:
        """Send a request without a task: the frame is written now and ``on_answer`` is called
        later, from the socket's read callback or the timeout's timer, with the decoded response
        or the error :meth:`request` would raise (the same failure rules apply).

        Only on an open, negotiated session that is not re-authenticating; otherwise nothing is
        sent and False is returned (use :meth:`request`, which connects and waits). ``build``
        makes the request from the session's versions; a version the broker does not offer
        returns False too, so that :meth:`request` reports it.
        """
        session = self._session
        if (
            self._closed
            or session is None
            or session.failure is not None
            or session.versions is None
            or not session.open_for_requests.is_set()
        ):
            return False
        request = build(session.versions)
        offered = session.versions.broker_ranges.get(int(request.__api_key__))
        if offered is None or int(request.__version__) not in offered:
            return False
        correlation_id = session.allocate_correlation_id()
        data = self._frames.request_frame(
            request, correlation_id=correlation_id, client_id=self._client_id
        )
        timeout_ms = self._request_timeout_ms if timeout_ms is None else timeout_ms
        waiter = AnswerWaiter(
            session,
            correlation_id,
            request,
            on_answer,
            timeout_ms,
            decode=self._frames.response,
            drop=self._drop_now,
            address=self.address,
        )
        session.pending[correlation_id] = waiter
        session.write(data)
        return True

    async def close(self) -> None:
        """Close for good: in-flight requests fail with KafkaConnectionError; idempotent."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.shutdown(KafkaConnectionError(f"connection to {self.address} closed"))

    async def _open(self) -> object:
        return await self.connect()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self.is_connected else "idle"
        return f"<BrokerConnection {self.address} {state}>"

    # -- internals -------------------------------------------------------------------------

    async def _ensure_session(self) -> Session:
        async with self._connect_lock:
            if self._closed:
                raise KafkaConnectionError(f"connection to {self.address} is closed")
            session = self._session
            if session is not None and session.alive:
                return session
            self._session = await call_with_retry(self._open_session, self._retry_policy)
            return self._session

    async def _open_session(self) -> Session:
        ssl_context = self._security.ssl_context if self._security is not None else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_ms / 1000):
                _, session = await loop.create_connection(
                    lambda: Session(self.address, self._max_frame_bytes),
                    self.host,
                    self.port,
                    ssl=ssl_context,
                    server_hostname=self.host if ssl_context is not None else None,
                )
        except TimeoutError:
            raise KafkaConnectionError(
                f"timed out connecting to {self.address} after {self._connect_timeout_ms} ms"
            ) from None
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise KafkaConnectionError(f"could not connect to {self.address}: {reason}") from error
        try:
            session.versions = await self._negotiate(session)
            await self._authenticate(session)
        except BaseException:
            await session.shutdown(KafkaConnectionError(f"handshake with {self.address} failed"))
            raise
        _log.debug("connected to %s", self.address)
        return session

    async def _negotiate(self, session: Session) -> NegotiatedVersions:
        version = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS].max_version
        tried: set[int] = set()
        while True:
            tried.add(version)
            request = build_api_versions_request(version, software_version=__version__)
            frame = await self._exchange(session, request, None)
            response = decode_api_versions_frame(frame, version)
            fallback = retry_version_after_unsupported(response)
            if fallback is not None and fallback not in tried:
                _log.debug(
                    "%s refused ApiVersions v%d; retrying v%d", self.address, version, fallback
                )
                version = fallback
                continue
            ranges = parse_api_versions_response(response)
            return negotiate_versions(ranges, required=self._required_apis)

    async def _authenticate(self, session: Session, *, again: bool = False) -> None:
        """Run SASL on a negotiated session when configured (no-op otherwise); with ``again``,
        re-authenticate an authenticated one. Schedules the next re-authentication."""
        credentials = self._security.sasl if self._security is not None else None
        if credentials is None:
            return
        assert session.versions is not None

        async def send(request: RequestPayload) -> ResponsePayload:
            frame = await self._exchange(session, request, None, sasl=True)
            return decode_response_frame(frame, response_type_for(type(request)))[1]

        outcome = await authenticate(
            send, session.versions.broker_ranges, credentials, self.address, reauthenticating=again
        )
        delay_ms = reauthentication_delay_ms(outcome.session_lifetime_ms)
        if delay_ms is not None:
            session.reauth_task = asyncio.create_task(
                self._reauthenticate_after(session, delay_ms),
                name=f"kafka-reauthenticate {self.address}",
            )

    async def _reauthenticate_after(self, session: Session, delay_ms: int) -> None:
        """KIP-368: after ``delay_ms``, authenticate again on the same session."""
        await asyncio.sleep(delay_ms / 1000)
        if not session.alive:
            return
        session.open_for_requests.clear()
        try:
            await self._authenticate(session, again=True)
        except ConsumerError as error:
            _log.warning("re-authentication to %s failed (%s); reconnecting", self.address, error)
            await self._drop(
                session,
                KafkaConnectionError(f"re-authentication to {self.address} failed: {error}"),
            )
        finally:
            session.open_for_requests.set()

    async def _exchange(
        self,
        session: Session,
        request: RequestPayload,
        timeout_ms: int | None,
        *,
        sasl: bool = False,
    ) -> bytes:
        """Send one request frame and wait for the frame answering it (``sasl``: a request of
        the authentication itself, which does not wait for a re-authentication to end)."""
        timeout_ms = self._request_timeout_ms if timeout_ms is None else timeout_ms
        if not sasl and not session.open_for_requests.is_set():
            try:
                async with asyncio.timeout(timeout_ms / 1000):
                    await session.open_for_requests.wait()
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"re-authentication with {self.address} did not end within {timeout_ms} ms"
                ) from None
        if session.failure is not None:
            raise copy_error(session.failure)
        correlation_id = session.allocate_correlation_id()
        if sasl:  # never kept: authentication frames may carry secrets
            data = encode_request_frame(
                request, correlation_id=correlation_id, client_id=self._client_id
            )
        else:
            data = self._frames.request_frame(
                request, correlation_id=correlation_id, client_id=self._client_id
            )
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        session.pending[correlation_id] = future
        what = f"{api_label(int(request.__api_key__))} v{request.__version__}"
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                session.write(data)
                await session.drain()
                return await future
        except TimeoutError:
            await self._drop(
                session,
                KafkaConnectionError(
                    f"connection to {self.address} dropped: {what} timed out after {timeout_ms} ms"
                ),
            )
            raise KafkaTimeoutError(
                f"{what} to {self.address} got no response within {timeout_ms} ms"
            ) from None
        except asyncio.CancelledError:
            future.cancel()
            raise
        except OSError as error:
            failure = KafkaConnectionError(f"sending {what} to {self.address} failed: {error}")
            await self._drop(session, failure)
            raise failure from error
        finally:
            if not future.cancelled():
                # Keep a cancelled caller's entry, so its late response is recognised and dropped.
                session.pending.pop(correlation_id, None)

    def _drop_now(self, session: Session, error: ConsumerError) -> None:
        """:meth:`_drop` from a callback: the transport closes in the background."""
        if self._session is session:
            self._session = None
        session.fail(error)
        if session.reauth_task is not None:
            session.reauth_task.cancel()

    async def _drop(self, session: Session, error: ConsumerError) -> None:
        if self._session is session:
            self._session = None
        await session.shutdown(error)
