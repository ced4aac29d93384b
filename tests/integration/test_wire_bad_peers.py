"""Bad bootstrap addresses give a clear error within seconds, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from consumer._runtime.cluster import ClusterClient
from consumer._runtime.retry import RetryPolicy
from consumer.errors import KafkaConnectionError, ProtocolError

pytestmark = pytest.mark.integration

BOUND_S = 10.0


@pytest.fixture
def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest_asyncio.fixture
async def http_port() -> AsyncIterator[int]:
    """A small HTTP-ish server: answers anything with a 400 page."""
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(ConnectionError):
            await reader.read(4096)
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nno\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    for writer in writers:
        writer.close()
    await server.wait_closed()


@pytest.mark.asyncio
async def test_unreachable_bootstrap_fails_within_seconds(closed_port: int) -> None:
    client = ClusterClient(
        f"127.0.0.1:{closed_port}",
        connect_retry=RetryPolicy(max_attempts=3, max_elapsed_ms=3_000),
    )
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{closed_port}"):
        await asyncio.wait_for(client.start(), BOUND_S)
    assert time.monotonic() - started < BOUND_S
    await client.close()


@pytest.mark.asyncio
async def test_bootstrap_that_is_not_kafka_is_a_protocol_error(http_port: int) -> None:
    client = ClusterClient(f"127.0.0.1:{http_port}", request_timeout_ms=5_000)
    started = time.monotonic()
    with pytest.raises(ProtocolError, match="Kafka broker"):
        await asyncio.wait_for(client.start(), BOUND_S)
    assert time.monotonic() - started < 2.0
    await client.close()
