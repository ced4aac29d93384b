"""A small view of a Kafka cluster: bootstrap, metadata, one connection per broker, and
group-coordinator lookup."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence

from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._config.types import Secret
from consumer._wire import (
    ALL_GROUP_APIS,
    ApiKey,
    BrokerAddress,
    ClusterMetadata,
    NegotiatedVersions,
    build_find_coordinator_request,
    build_metadata_request,
    parse_find_coordinator_response,
    parse_metadata_response,
)
from consumer.errors import (
    ConsumerError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotCoordinatorError,
)

from .closing import AsyncClosing
from .connection import (
    DEFAULT_CLIENT_ID,
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_REQUEST_TIMEOUT_MS,
    BrokerConnection,
)
from .retry import CONNECT_RETRY, LOOKUP_RETRY, RetryPolicy, call_with_retry
from .sasl_mechanisms import SaslCredentials
from .security import ConnectionSecurity, SecuritySettings, connection_security

__all__ = ["ClusterClient", "RequestBuilder", "parse_bootstrap_servers"]

RequestBuilder = Callable[[NegotiatedVersions], RequestPayload]
"""Builds a request once the versions of the connection it goes to are known."""

_COORDINATOR_MOVED_CODES = frozenset(
    {NotCoordinatorError.error_code, CoordinatorNotAvailableError.error_code}
)


def parse_bootstrap_servers(bootstrap_servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", "[::1]:9092"]`` -> ``[(host, port), ...]``."""
    entries = (
        bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else bootstrap_servers
    )
    addresses: list[tuple[str, int]] = []
    for raw_entry in entries:
        entry = raw_entry.strip()
        if not entry:
            continue
        host, separator, port_text = entry.rpartition(":")
        if not separator or not host or not port_text.isdigit():
            raise ValueError(f"bootstrap server {entry!r} is not host:port")
        addresses.append((host.strip("[]"), int(port_text)))
    if not addresses:
        raise ValueError("bootstrap_servers names no broker")
    return addresses


class ClusterClient(AsyncClosing):
    """Connections to the brokers of one cluster, created on demand.

    Args:
        bootstrap_servers: ``host:port`` list (comma-separated string or sequence).
        client_id: sent in every request header.
        connect_timeout_ms / request_timeout_ms / connect_retry: passed to each connection.
        lookup_retry: how coordinator lookups are retried (retriable broker errors included).
        required_apis: APIs every broker must offer.
        security: TLS and SASL for every connection (prepared once here, so all connections
            share one SSL context); None: plaintext.
        separate_coordinator_connection: send coordinator requests over a connection of their
            own, not the one :meth:`connection_to` gives for that broker. A broker answers the
            requests of one connection in order, so a heartbeat would otherwise wait behind a
            long-polling fetch (the share consumer's ShareFetch) on the same broker.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = DEFAULT_CLIENT_ID,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        connect_retry: RetryPolicy = CONNECT_RETRY,
        lookup_retry: RetryPolicy = LOOKUP_RETRY,
        required_apis: Iterable[ApiKey] = ALL_GROUP_APIS,
        security: SecuritySettings | ConnectionSecurity | None = None,
        separate_coordinator_connection: bool = False,
    ) -> None:
        self._bootstrap_addresses = parse_bootstrap_servers(bootstrap_servers)
        self._client_id = client_id
        self._connect_timeout_ms = connect_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._connect_retry = connect_retry
        self._lookup_retry = lookup_retry
        self._required_apis = frozenset(required_apis)
        self._security = connection_security(security)
        self._bootstrap: BrokerConnection | None = None
        self._brokers: dict[int, BrokerAddress] = {}
        self._connections: dict[int, BrokerConnection] = {}
        self._coordinators: dict[str, int] = {}
        self._separate_coordinator = separate_coordinator_connection
        self._coordinator_connections: dict[int, BrokerConnection] = {}
        self._closed = False

    @property
    def brokers(self) -> dict[int, BrokerAddress]:
        """The brokers known from the latest metadata, by node id."""
        return dict(self._brokers)

    def set_sasl_credentials(self, credentials: SaslCredentials) -> None:
        """Authenticate with ``credentials`` from now on: every connection opened or reopened
        later uses them; connections already authenticated stay as they are.

        Raises:
            ValueError: the client does not use SASL (``security.protocol``).
        """
        security = self._security
        if security is None or security.sasl is None:
            raise ValueError(
                "SASL credentials need security.protocol sasl_plaintext or sasl_ssl, got "
                f"{'plaintext' if security is None else security.protocol}"
            )
        self._security = dataclasses.replace(security, sasl=credentials)
        known = [
            *self._connections.values(),
            *self._coordinator_connections.values(),
            *([self._bootstrap] if self._bootstrap else []),
        ]
        for connection in known:
            connection.use_security(self._security)

    def set_sasl_user(self, username: str, password: str) -> None:
        """:meth:`set_sasl_credentials` with the configured mechanism (``set_sasl_credentials()``
        of the consumers: a new user name and password for PLAIN or SCRAM).

        Raises:
            ValueError: the client does not use SASL, or uses OAUTHBEARER (no password).
        """
        current = None if self._security is None else self._security.sasl
        if not isinstance(current, SaslCredentials):
            raise ValueError(
                "a user name and password need sasl.mechanism PLAIN, SCRAM-SHA-256 or "
                "SCRAM-SHA-512 over security.protocol sasl_plaintext or sasl_ssl"
            )
        self.set_sasl_credentials(SaslCredentials(current.mechanism, username, Secret(password)))

    async def start(self) -> ClusterMetadata:
        """Connect to the first reachable bootstrap broker and learn the broker list.

        Raises:
            KafkaConnectionError: no bootstrap broker could be reached (the last error chained).
        """
        return await self.metadata(topics=())

    async def metadata(
        self, topics: Sequence[str] | Sequence[uuid.UUID] | None = None
    ) -> ClusterMetadata:
        """Metadata for every topic (None), no topic (empty), topic names, or topic ids."""
        connection = await self._any_connection()
        request = build_metadata_request(connection.api_version(ApiKey.METADATA), topics)
        response = await connection.request(request)
        snapshot = _parsed_metadata(response)
        self._brokers = dict(snapshot.brokers)
        return snapshot

    async def connection_to(self, node_id: int) -> BrokerConnection:
        """The (connected) connection to broker ``node_id``, opened if needed."""
        self._check_open()
        connection = self._connections.get(node_id)
        if connection is None:
            if node_id not in self._brokers:
                await self.metadata(topics=())
            broker = self._brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker node {node_id} is not in the cluster metadata")
            connection = self._adopt_bootstrap(broker) or self._new_connection(
                broker.host, broker.port, node_id
            )
            self._connections[node_id] = connection
        await connection.connect()
        return connection

    async def find_coordinator(self, group_id: str, *, refresh: bool = False) -> BrokerAddress:
        """The broker coordinating ``group_id`` (cached until invalidated or ``refresh``).

        Retriable errors (e.g. COORDINATOR_NOT_AVAILABLE on a fresh cluster) are retried with
        the lookup policy; other broker errors are raised as their typed exception.
        """
        if not refresh and group_id in self._coordinators:
            node_id = self._coordinators[group_id]
            if node_id in self._brokers:
                return self._brokers[node_id]
        location = await call_with_retry(
            lambda: self._lookup_coordinator(group_id), self._lookup_retry
        )
        self._coordinators[group_id] = location.node_id
        return location

    def invalidate_coordinator(self, group_id: str) -> None:
        """Forget the cached coordinator of ``group_id`` (after NOT_COORDINATOR and the like)."""
        self._coordinators.pop(group_id, None)

    async def coordinator_connection(self, group_id: str) -> BrokerConnection:
        """The connection to the coordinator of ``group_id``."""
        coordinator = await self.find_coordinator(group_id)
        try:
            if self._separate_coordinator:
                return await self._coordinator_connection_to(coordinator)
            return await self.connection_to(coordinator.node_id)
        except ConsumerError:
            self.invalidate_coordinator(group_id)
            raise

    async def coordinator_request(
        self,
        group_id: str,
        request: RequestPayload | RequestBuilder,
        *,
        timeout_ms: int | None = None,
    ) -> ResponsePayload:
        """Send a request to the coordinator of ``group_id`` and return the response.

        ``request`` may be a builder called with the coordinator connection's negotiated
        versions. The request is sent once: a transport failure, or a response whose top-level
        (or group-level) error is NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, forgets the
        cached coordinator so the next call looks it up again; the caller decides about retries.
        """
        connection = await self.coordinator_connection(group_id)
        payload = request if not callable(request) else request(connection.versions)
        try:
            response = await connection.request(payload, timeout_ms=timeout_ms)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.invalidate_coordinator(group_id)
            raise
        if _coordinator_moved(response):
            self.invalidate_coordinator(group_id)
        return response

    def coordinator_request_soon(
        self,
        group_id: str,
        request: RequestBuilder,
        on_answer: Callable[[ResponsePayload | ConsumerError], None],
        *,
        timeout_ms: int | None = None,
    ) -> bool:
        """:meth:`coordinator_request` without a task, when the coordinator of ``group_id`` is
        known and its connection open (:meth:`BrokerConnection.request_soon`); False (nothing
        sent) otherwise. ``on_answer`` gets the response or the error; the cached coordinator
        is forgotten on the same outcomes as :meth:`coordinator_request`.
        """
        node_id = self._coordinators.get(group_id)
        broker = None if node_id is None else self._brokers.get(node_id)
        if self._closed or broker is None:
            return False
        connections = (
            self._coordinator_connections if self._separate_coordinator else self._connections
        )
        connection = connections.get(broker.node_id)
        if connection is None or (connection.host, connection.port) != (broker.host, broker.port):
            return False

        def answered(outcome: ResponsePayload | ConsumerError) -> None:
            if isinstance(outcome, (KafkaConnectionError, KafkaTimeoutError)) or (
                not isinstance(outcome, ConsumerError) and _coordinator_moved(outcome)
            ):
                self.invalidate_coordinator(group_id)
            on_answer(outcome)

        return connection.request_soon(request, answered, timeout_ms=timeout_ms)

    async def close(self) -> None:
        """Close every connection; idempotent."""
        self._closed = True
        connections = [*self._connections.values(), *self._coordinator_connections.values()]
        if self._bootstrap is not None and self._bootstrap not in connections:
            connections.append(self._bootstrap)
        self._connections.clear()
        self._coordinator_connections.clear()
        self._bootstrap = None
        for connection in connections:
            await connection.close()

    async def _open(self) -> object:
        return await self.start()

    # -- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaConnectionError("the cluster client is closed")

    async def _coordinator_connection_to(self, broker: BrokerAddress) -> BrokerConnection:
        """The coordinator-only connection to ``broker`` (``separate_coordinator_connection``)."""
        self._check_open()
        connection = self._coordinator_connections.get(broker.node_id)
        if connection is None or (connection.host, connection.port) != (broker.host, broker.port):
            if connection is not None:
                await connection.close()
            connection = self._new_connection(broker.host, broker.port, broker.node_id)
            self._coordinator_connections[broker.node_id] = connection
        await connection.connect()
        return connection

    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            client_id=self._client_id,
            node_id=node_id,
            connect_timeout_ms=self._connect_timeout_ms,
            request_timeout_ms=self._request_timeout_ms,
            retry_policy=self._connect_retry,
            required_apis=self._required_apis,
            security=self._security,
        )

    def _adopt_bootstrap(self, broker: BrokerAddress) -> BrokerConnection | None:
        """Reuse the bootstrap connection for the broker it turned out to be."""
        bootstrap = self._bootstrap
        if bootstrap is not None and (bootstrap.host, bootstrap.port) == (broker.host, broker.port):
            bootstrap.node_id = broker.node_id
            return bootstrap
        return None

    async def _any_connection(self) -> BrokerConnection:
        self._check_open()
        for open_connection in self._connections.values():
            if open_connection.is_connected:
                return open_connection
        if self._bootstrap is not None and self._bootstrap.is_connected:
            return self._bootstrap
        last_error: ConsumerError | None = None
        for host, port in self._bootstrap_addresses:
            previous = self._bootstrap
            if previous is not None and (previous.host, previous.port) == (host, port):
                connection = previous
            else:
                connection = self._new_connection(host, port, None)
            try:
                await connection.connect()
            except (KafkaConnectionError, KafkaTimeoutError) as error:
                last_error = error  # a failed connect holds no socket; try the next address
                continue
            await self._replace_bootstrap(connection)
            return connection
        raise KafkaConnectionError(
            f"none of the bootstrap servers could be reached: {last_error}"
        ) from last_error

    async def _replace_bootstrap(self, connection: BrokerConnection) -> None:
        previous = self._bootstrap
        self._bootstrap = connection
        adopted = previous in self._connections.values()
        if previous is not None and previous is not connection and not adopted:
            await previous.close()

    async def _lookup_coordinator(self, group_id: str) -> BrokerAddress:
        connection = await self._any_connection()
        version = connection.api_version(ApiKey.FIND_COORDINATOR)
        response = await connection.request(build_find_coordinator_request(version, group_id))
        (location,) = parse_find_coordinator_response(response, single_key=group_id)
        if location.error is not None:
            raise location.error
        broker = BrokerAddress(node_id=location.node_id, host=location.host, port=location.port)
        self._brokers.setdefault(broker.node_id, broker)
        return broker


#: The Metadata responses parsed lately in this process, by ``id()``, with their parses. The
#: connections' frame cache hands every member of a process the same response object for the same
#: answer (see ``frame_cache``), so the members of a cold join parse a 900-partition answer once,
#: not once each. A few are kept: their brokers-only and topic answers arrive interleaved. The
#: entry holds the response, so its ``id()`` cannot be reused while it is kept.
_PARSED_KEPT = 8
_parsed: dict[int, tuple[ResponsePayload, ClusterMetadata]] = {}
_parsed_lock = threading.Lock()


def _parsed_metadata(response: ResponsePayload) -> ClusterMetadata:
    """``parse_metadata_response(response)``, reused when ``response`` was parsed lately (the
    snapshot is immutable)."""
    with _parsed_lock:
        known = _parsed.get(id(response))
    if known is not None and known[0] is response:
        return known[1]
    snapshot = parse_metadata_response(response)
    with _parsed_lock:
        _parsed[id(response)] = (response, snapshot)
        while len(_parsed) > _PARSED_KEPT:
            del _parsed[next(iter(_parsed))]
    return snapshot


def _coordinator_moved(response: ResponsePayload) -> bool:
    if getattr(response, "error_code", None) in _COORDINATOR_MOVED_CODES:
        return True
    groups = getattr(response, "groups", ())  # per-group codes (OffsetFetch v8+, say)
    return bool(groups) and any(
        getattr(group, "error_code", None) in _COORDINATOR_MOVED_CODES for group in groups
    )
