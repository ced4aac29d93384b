"""Tiny asyncio peers on 127.0.0.1 for connection tests: a fake Kafka broker and misbehaving
servers. Everything they start is stopped and awaited at fixture teardown."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from kio.index import load_payload_module
from kio.schema.api_versions import v0 as api_versions_v0
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from consumer._wire import FrameDecoder, decode_request_frame, encode_response_frame
from consumer._wire._units import i32_timedelta_from_ms

KAFKA_4_RANGES: dict[int, tuple[int, int]] = {
    3: (0, 13),
    8: (2, 10),
    9: (1, 10),
    10: (0, 6),
    18: (0, 4),
    68: (0, 1),
    69: (0, 1),
}

Handler = Callable[[RequestHeader, RequestPayload], Awaitable[ResponsePayload | None]]
"""Answers one non-ApiVersions request; None means "never answer"."""


@dataclass
class FakeBroker:
    """Speaks just enough Kafka: ApiVersions (with the v0 refusal of too-new versions) plus
    whatever ``handler`` answers. Each request is handled in its own task, so responses can
    overtake each other."""

    api_ranges: dict[int, tuple[int, int]] = field(default_factory=lambda: dict(KAFKA_4_RANGES))
    handler: Handler | None = None
    port: int = 0
    connections: int = 0
    requests: list[tuple[RequestHeader, RequestPayload]] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    def drop_connections(self) -> None:
        """Close every accepted connection (the server keeps listening)."""
        for writer in self._writers:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        decoder = FrameDecoder()
        try:
            while chunk := await reader.read(65536):
                for frame in decoder.feed(chunk):
                    header, request = decode_request_frame(frame)
                    self.requests.append((header, request))
                    answer = asyncio.create_task(self._answer(header, request, writer))
                    self._tasks.add(answer)
                    answer.add_done_callback(self._tasks.discard)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _answer(
        self, header: RequestHeader, request: RequestPayload, writer: asyncio.StreamWriter
    ) -> None:
        if int(header.request_api_key) == 18:
            response: ResponsePayload | None = self._api_versions(int(header.request_api_version))
        elif self.handler is not None:
            response = await self.handler(header, request)
        else:
            response = None
        if response is not None and not writer.is_closing():
            writer.write(encode_response_frame(response, correlation_id=header.correlation_id))

    def _api_versions(self, version: int) -> ResponsePayload:
        low, high = self.api_ranges.get(18, (0, 0))
        if version > high:
            return api_versions_v0.ApiVersionsResponse(
                error_code=ErrorCode.unsupported_version,
                api_keys=(
                    ApiVersionV0(api_key=i16(18), min_version=i16(low), max_version=i16(high)),
                ),
            )
        schema = load_payload_module(18, version, EntityType.response)
        entries = tuple(
            schema.ApiVersion(api_key=i16(k), min_version=i16(a), max_version=i16(b))
            for k, (a, b) in self.api_ranges.items()
        )
        extra = {} if version == 0 else {"throttle_time": i32_timedelta_from_ms(0)}
        response: ResponsePayload = schema.ApiVersionsResponse(
            error_code=ErrorCode.none, api_keys=entries, **extra
        )
        return response


@pytest_asyncio.fixture
async def fake_broker_factory() -> AsyncIterator[Callable[..., Awaitable[FakeBroker]]]:
    """Starts FakeBrokers on demand; all are stopped at teardown."""
    started: list[FakeBroker] = []

    async def start(**kwargs: object) -> FakeBroker:
        broker = FakeBroker(**kwargs)  # type: ignore[arg-type]
        await broker.start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        await broker.stop()


@dataclass
class RawServer:
    """A server whose per-connection behaviour is a coroutine function."""

    port: int
    connections: int = 0


@pytest_asyncio.fixture
async def raw_server_factory() -> AsyncIterator[
    Callable[
        [Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]],
        Awaitable[RawServer],
    ]
]:
    """Starts plain TCP servers running a given per-connection coroutine."""
    servers: list[asyncio.Server] = []
    tasks: set[asyncio.Task[None]] = set()
    writers: list[asyncio.StreamWriter] = []

    async def start(
        behaviour: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> RawServer:
        info = RawServer(port=0)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            info.connections += 1
            writers.append(writer)
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await behaviour(reader, writer)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()
                tasks.discard(task)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        info.port = server.sockets[0].getsockname()[1]
        return info

    yield start
    for server in servers:
        server.close()
    for writer in writers:
        writer.close()
    for task in list(tasks):
        task.cancel()
    for task in list(tasks):
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for server in servers:
        await server.wait_closed()


@pytest.fixture
def refused_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
