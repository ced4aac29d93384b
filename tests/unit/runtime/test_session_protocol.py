"""The broker session as an asyncio.Protocol: a peer closing mid-frame, and write flow control.

Every wait is bounded; synchronisation uses futures and events, not sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from consumer._runtime.connection import BrokerConnection
from consumer._runtime.retry import NO_RETRY
from consumer._runtime.session import Session
from consumer.errors import KafkaConnectionError

BOUND_S = 5.0
FakeFactory = Callable[..., Awaitable[Any]]
RawFactory = Callable[..., Awaitable[Any]]


async def _half_frame_then_close(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    await reader.read(1024)  # the ApiVersions request
    writer.write(b"\x00\x00\x00\x10\x00\x00")  # a 16-byte frame of which 2 bytes came
    await writer.drain()
    writer.close()


@pytest.mark.asyncio
async def test_a_peer_closing_in_the_middle_of_a_frame_is_reported_as_such(
    raw_server_factory: RawFactory,
) -> None:
    server = await raw_server_factory(_half_frame_then_close)
    connection = BrokerConnection(
        "127.0.0.1", server.port, request_timeout_ms=2_000, retry_policy=NO_RETRY
    )
    try:
        with pytest.raises(KafkaConnectionError, match=r"middle of a frame \(6 bytes buffered\)"):
            await asyncio.wait_for(connection.connect(), BOUND_S)
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_drain_waits_while_the_transport_is_paused_and_fails_if_the_session_dies(
    fake_broker_factory: FakeFactory,
) -> None:
    broker = await fake_broker_factory()
    connection = BrokerConnection("127.0.0.1", broker.port, retry_policy=NO_RETRY)
    async with connection:
        session = connection._session  # white-box: drive the protocol's flow control
        assert isinstance(session, Session)
        await asyncio.wait_for(session.drain(), BOUND_S)  # not paused: at once
        session.pause_writing()
        waiting = asyncio.create_task(session.drain())
        await asyncio.sleep(0)  # one loop step: the task runs up to its wait
        assert not waiting.done()
        session.resume_writing()
        await asyncio.wait_for(waiting, BOUND_S)
        session.pause_writing()
        waiting = asyncio.create_task(session.drain())
        await asyncio.sleep(0)
        assert not waiting.done()
        broker.drop_connections()
        with pytest.raises(KafkaConnectionError, match="closed the connection"):
            await asyncio.wait_for(waiting, BOUND_S)
        assert not session.alive
        with pytest.raises(KafkaConnectionError):
            session.write(b"\x00\x00\x00\x00")  # a dead session refuses writes
