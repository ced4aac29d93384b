"""BrokerConnection against tiny asyncio peers on 127.0.0.1: typed errors, never a hang.

Every test is bounded by ``asyncio.wait_for``; synchronisation uses events, not sleeps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kio.schema.consumer_group_heartbeat.v1 import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from consumer._runtime.connection import BrokerConnection
from consumer._runtime.retry import NO_RETRY, RetryPolicy
from consumer._wire import (
    KIP848_MISSING_MESSAGE,
    ApiKey,
    build_heartbeat_request,
    build_metadata_request,
    parse_heartbeat_response,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedBrokerError,
)
from consumer.member import HeartbeatRequest

T = TypeVar("T")
BOUND_S = 5.0

# The fixtures' classes live in conftest.py, which is not importable as a module here.
FakeFactory = Callable[..., Awaitable[Any]]
RawFactory = Callable[..., Awaitable[Any]]


async def bounded(awaitable: Awaitable[T], seconds: float = BOUND_S) -> T:
    return await asyncio.wait_for(awaitable, seconds)


def heartbeat(epoch: int) -> RequestPayload:
    return build_heartbeat_request(
        HeartbeatRequest(group_id="g", member_id="m", member_epoch=epoch), 1
    )


def echo_epoch(request: RequestPayload) -> ConsumerGroupHeartbeatResponse:
    assert isinstance(request, ConsumerGroupHeartbeatRequest)
    return ConsumerGroupHeartbeatResponse(
        throttle_time=i32_timedelta_from_ms(0),
        error_code=ErrorCode.none,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        heartbeat_interval=i32_timedelta_from_ms(500),
    )


def connection_to(port: int, **kwargs: object) -> BrokerConnection:
    options: dict[str, object] = {"request_timeout_ms": 2_000, "retry_policy": NO_RETRY}
    options.update(kwargs)
    return BrokerConnection("127.0.0.1", port, **options)  # type: ignore[arg-type]


def own_tasks() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("kafka-")}


@pytest.mark.asyncio
async def test_connect_negotiates_versions(fake_broker_factory: FakeFactory) -> None:
    broker = await fake_broker_factory()
    connection = connection_to(broker.port)
    versions = await bounded(connection.connect())
    assert versions.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 1
    assert versions.version_for(ApiKey.OFFSET_COMMIT) == 10
    header, _ = broker.requests[0]
    assert (header.request_api_key, header.request_api_version) == (18, 4)
    assert header.client_id == "kafka-group-member"
    await connection.close()
    assert not own_tasks()


@pytest.mark.asyncio
async def test_api_versions_falls_back_to_v0_when_refused(fake_broker_factory: FakeFactory) -> None:
    ranges = {3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 3), 18: (0, 0), 68: (0, 0)}
    broker = await fake_broker_factory(api_ranges=ranges)
    async with connection_to(broker.port) as connection:
        assert [int(h.request_api_version) for h, _ in broker.requests] == [4, 0]
        assert connection.api_version(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 0
        assert connection.api_version(ApiKey.FIND_COORDINATOR) == 3
        assert connection.api_version(ApiKey.OFFSET_COMMIT) == 9


@pytest.mark.asyncio
async def test_broker_without_kip848_is_refused_with_a_clear_message(
    fake_broker_factory: FakeFactory,
) -> None:
    ranges = {3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 4), 18: (0, 3)}
    broker = await fake_broker_factory(api_ranges=ranges)
    connection = connection_to(broker.port)
    with pytest.raises(UnsupportedBrokerError) as caught:
        await bounded(connection.connect())
    assert KIP848_MISSING_MESSAGE in str(caught.value)
    assert not connection.is_connected
    await connection.close()
    assert not own_tasks()


@pytest.mark.asyncio
async def test_concurrent_requests_are_matched_by_correlation_id(
    fake_broker_factory: FakeFactory,
) -> None:
    release = {epoch: asyncio.Event() for epoch in (1, 2, 3)}
    arrived = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        assert isinstance(request, ConsumerGroupHeartbeatRequest)
        if len(release) == sum(1 for h, _ in broker.requests if h.request_api_key == 68):
            arrived.set()
        await release[int(request.member_epoch)].wait()
        return echo_epoch(request)

    broker = await fake_broker_factory(handler=handler)
    async with connection_to(broker.port) as connection:
        calls = [asyncio.create_task(connection.request(heartbeat(e))) for e in (1, 2, 3)]
        await bounded(arrived.wait())
        for epoch in (3, 1, 2):  # answer out of order
            release[epoch].set()
        responses = await bounded(asyncio.gather(*calls))
        assert [parse_heartbeat_response(r).member_epoch for r in responses] == [1, 2, 3]


@pytest.mark.asyncio
async def test_unanswered_request_times_out_and_drops_the_connection(
    fake_broker_factory: FakeFactory,
) -> None:
    held = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload | None:
        assert isinstance(request, ConsumerGroupHeartbeatRequest)
        if request.member_epoch == 66:
            return None  # never answered
        if request.member_epoch == 77:
            held.set()
            await asyncio.Event().wait()  # answered never either, but fails with the drop
        return echo_epoch(request)

    broker = await fake_broker_factory(handler=handler)
    async with connection_to(broker.port) as connection:
        other = asyncio.create_task(connection.request(heartbeat(77), timeout_ms=5_000))
        await bounded(held.wait())
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="within 300 ms"):
            await bounded(connection.request(heartbeat(66), timeout_ms=300))
        assert time.monotonic() - started < 2.0
        with pytest.raises(KafkaConnectionError, match="timed out"):
            await bounded(other)
        assert not connection.is_connected
        response = await bounded(connection.request(heartbeat(5)))  # reconnects
        assert parse_heartbeat_response(response).member_epoch == 5
        assert broker.connections == 2


@pytest.mark.asyncio
async def test_close_fails_pending_requests_and_leaves_no_tasks(
    fake_broker_factory: FakeFactory,
) -> None:
    received = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload | None:
        received.set()
        return None

    broker = await fake_broker_factory(handler=handler)
    connection = connection_to(broker.port)
    await bounded(connection.connect())
    pending = asyncio.create_task(connection.request(heartbeat(1)))
    await bounded(received.wait())
    await bounded(connection.close())
    with pytest.raises(KafkaConnectionError, match="closed"):
        await bounded(pending)
    assert not own_tasks()
    with pytest.raises(KafkaConnectionError, match="closed"):
        await bounded(connection.request(heartbeat(2)))
    await connection.close()  # idempotent


@pytest.mark.asyncio
async def test_peer_closing_mid_session_fails_in_flight_and_reconnects(
    fake_broker_factory: FakeFactory,
) -> None:
    received = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload | None:
        assert isinstance(request, ConsumerGroupHeartbeatRequest)
        if request.member_epoch == 1:
            received.set()
            return None
        return echo_epoch(request)

    broker = await fake_broker_factory(handler=handler)
    async with connection_to(broker.port) as connection:
        pending = asyncio.create_task(connection.request(heartbeat(1)))
        await bounded(received.wait())
        broker.drop_connections()
        with pytest.raises(KafkaConnectionError, match="closed the connection"):
            await bounded(pending)
        response = await bounded(connection.request(heartbeat(2)))
        assert parse_heartbeat_response(response).member_epoch == 2


@pytest.mark.asyncio
async def test_cancelled_request_leaves_the_connection_usable(
    fake_broker_factory: FakeFactory,
) -> None:
    gate = asyncio.Event()
    received = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        assert isinstance(request, ConsumerGroupHeartbeatRequest)
        if request.member_epoch == 1:
            received.set()
            await gate.wait()
        return echo_epoch(request)

    broker = await fake_broker_factory(handler=handler)
    async with connection_to(broker.port) as connection:
        first = asyncio.create_task(connection.request(heartbeat(1)))
        await bounded(received.wait())
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        gate.set()  # the late response arrives and must be ignored
        response = await bounded(connection.request(heartbeat(2)))
        assert parse_heartbeat_response(response).member_epoch == 2
        assert connection.is_connected
        assert broker.connections == 1


@pytest.mark.asyncio
async def test_version_the_broker_lacks_is_refused_before_sending(
    fake_broker_factory: FakeFactory,
) -> None:
    ranges = {3: (0, 11), 8: (2, 9), 9: (1, 9), 10: (0, 6), 18: (0, 4), 68: (0, 1)}
    broker = await fake_broker_factory(api_ranges=ranges)
    async with connection_to(broker.port) as connection:
        with pytest.raises(UnsupportedBrokerError, match=r"Metadata \(3\) v13"):
            await bounded(connection.request(build_metadata_request(13, [])))
        assert len(broker.requests) == 1  # only ApiVersions went out


@pytest.mark.asyncio
async def test_undecodable_response_is_a_protocol_error(fake_broker_factory: FakeFactory) -> None:
    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        # A heartbeat response to a Metadata request: right correlation id, wrong schema.
        return echo_epoch(heartbeat(1))

    broker = await fake_broker_factory(handler=handler)
    async with connection_to(broker.port) as connection:
        with pytest.raises(ProtocolError, match="Metadata"):
            await bounded(connection.request(build_metadata_request(13, [])))
        assert not connection.is_connected


async def _http_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1024)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    await reader.read(1024)


async def _wrong_correlation_server(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    await reader.read(1024)
    writer.write(b"\x00\x00\x00\x08\x7f\xff\xff\xf0garb")
    await writer.drain()
    await reader.read(1024)


async def _silent_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.read(1024):
        pass


async def _closing_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "behaviour", [_http_server, _wrong_correlation_server], ids=["http", "wrong-correlation-id"]
)
async def test_peer_that_is_not_kafka_gives_protocol_error_quickly(
    raw_server_factory: RawFactory,
    behaviour: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> None:
    server = await raw_server_factory(behaviour)
    connection = connection_to(server.port, request_timeout_ms=10_000)
    started = time.monotonic()
    with pytest.raises(ProtocolError, match="Kafka broker"):
        await bounded(connection.connect())
    assert time.monotonic() - started < 2.0
    await connection.close()
    assert not own_tasks()


@pytest.mark.asyncio
async def test_silent_peer_times_out_within_the_request_timeout(
    raw_server_factory: RawFactory,
) -> None:
    server = await raw_server_factory(_silent_server)
    connection = connection_to(server.port, request_timeout_ms=300)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="ApiVersions"):
        await bounded(connection.connect())
    assert 0.25 < time.monotonic() - started < 2.0
    await connection.close()
    assert not own_tasks()


@pytest.mark.asyncio
async def test_peer_closing_at_once_is_retried_then_reported(
    raw_server_factory: RawFactory,
) -> None:
    server = await raw_server_factory(_closing_server)
    policy = RetryPolicy(max_attempts=3, initial_backoff_ms=1, max_backoff_ms=5)
    connection = connection_to(server.port, retry_policy=policy)
    # Depending on timing the close shows as an EOF or as a reset; both are connection errors.
    with pytest.raises(KafkaConnectionError, match="closed the connection|reset by peer"):
        await bounded(connection.connect())
    assert server.connections == 3
    await connection.close()


@pytest.mark.asyncio
async def test_refused_port_is_a_connection_error(refused_port: int) -> None:
    policy = RetryPolicy(max_attempts=2, initial_backoff_ms=1, max_backoff_ms=5)
    connection = connection_to(refused_port, retry_policy=policy)
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{refused_port}"):
        await bounded(connection.connect())
    assert time.monotonic() - started < 2.0
    await connection.close()


@pytest.mark.asyncio
async def test_versions_need_a_connection() -> None:
    with pytest.raises(KafkaConnectionError, match="not connected"):
        _ = connection_to(1).versions
