"""BrokerConnection.request_soon: a request without a task, answered through a callback from
the socket's read callback or the timeout's timer, with the failure rules of ``request``.

Every wait is bounded; synchronisation uses futures and events, not sleeps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v1 import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from consumer._runtime.connection import BrokerConnection
from consumer._runtime.retry import NO_RETRY
from consumer._wire import (
    NegotiatedVersions,
    build_heartbeat_request,
    build_metadata_request,
    parse_heartbeat_response,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer.errors import ConsumerError, KafkaConnectionError, KafkaTimeoutError, ProtocolError
from consumer.member import HeartbeatRequest

BOUND_S = 5.0
FakeFactory = Callable[..., Awaitable[Any]]
Outcome = ResponsePayload | ConsumerError


def heartbeat_at(epoch: int, version: int = 1) -> Callable[[NegotiatedVersions], RequestPayload]:
    def build(_versions: NegotiatedVersions) -> RequestPayload:
        return build_heartbeat_request(
            HeartbeatRequest(group_id="g", member_id="m", member_epoch=epoch), version
        )

    return build


def echo_epoch(request: RequestPayload) -> ResponsePayload:
    assert isinstance(request, ConsumerGroupHeartbeatRequest)
    return ConsumerGroupHeartbeatResponse(
        throttle_time=i32_timedelta_from_ms(0),
        error_code=ErrorCode.none,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        heartbeat_interval=i32_timedelta_from_ms(500),
    )


class Answers:
    """Collects what request_soon's callback is given; ``next()`` waits for the next one."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Outcome] = asyncio.Queue()
        self.on_thread_task: list[asyncio.Task[Any] | None] = []

    def __call__(self, outcome: Outcome) -> None:
        self.on_thread_task.append(asyncio.current_task())
        self.queue.put_nowait(outcome)

    async def next(self) -> Outcome:
        return await asyncio.wait_for(self.queue.get(), BOUND_S)


def connection_to(port: int) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", port, request_timeout_ms=2_000, retry_policy=NO_RETRY)


@pytest.mark.asyncio
async def test_answer_arrives_through_the_callback_outside_any_task(
    fake_broker_factory: FakeFactory,
) -> None:
    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        return echo_epoch(request)

    broker = await fake_broker_factory(handler=handler)
    answers = Answers()
    connection = connection_to(broker.port)
    assert connection.request_soon(heartbeat_at(4), answers) is False  # not connected yet
    async with connection:
        tasks_before = asyncio.all_tasks()
        for epoch in (5, 6):  # the second reuses the cached frame with a new correlation id
            assert connection.request_soon(heartbeat_at(epoch), answers) is True
            assert asyncio.all_tasks() == tasks_before  # no task was made for it
            response = await answers.next()
            assert not isinstance(response, ConsumerError)
            assert parse_heartbeat_response(response).member_epoch == epoch
        assert answers.on_thread_task == [None, None]  # called from the read callback
        assert [int(h.request_api_key) for h, _ in broker.requests][-2:] == [68, 68]


@pytest.mark.asyncio
async def test_a_version_the_broker_lacks_is_not_sent(fake_broker_factory: FakeFactory) -> None:
    ranges = {18: (0, 4), 68: (0, 0), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 69: (0, 1)}
    broker = await fake_broker_factory(api_ranges=ranges)
    async with connection_to(broker.port) as connection:
        await asyncio.wait_for(connection.connect(), BOUND_S)
        assert connection.request_soon(heartbeat_at(1, version=1), Answers()) is False
        assert [int(h.request_api_key) for h, _ in broker.requests] == [18]


@pytest.mark.asyncio
async def test_no_answer_times_out_by_timer_and_drops_the_session(
    fake_broker_factory: FakeFactory,
) -> None:
    held = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload | None:
        assert isinstance(request, ConsumerGroupHeartbeatRequest)
        if request.member_epoch == 66:
            return None  # never answered
        if request.member_epoch == 77:
            held.set()
            await asyncio.Event().wait()
        return echo_epoch(request)

    broker = await fake_broker_factory(handler=handler)
    answers = Answers()
    async with connection_to(broker.port) as connection:
        await asyncio.wait_for(connection.connect(), BOUND_S)
        request_77 = heartbeat_at(77)(connection.versions)
        other = asyncio.create_task(connection.request(request_77, timeout_ms=5_000))
        await asyncio.wait_for(held.wait(), BOUND_S)
        started = time.monotonic()
        assert connection.request_soon(heartbeat_at(66), answers, timeout_ms=300)
        outcome = await answers.next()
        assert isinstance(outcome, KafkaTimeoutError)
        assert "within 300 ms" in str(outcome)
        assert time.monotonic() - started < 2.0
        with pytest.raises(KafkaConnectionError, match="timed out after 300 ms"):
            await asyncio.wait_for(other, BOUND_S)
        assert not connection.is_connected
        await asyncio.wait_for(connection.connect(), BOUND_S)  # reconnects
        assert broker.connections == 2


@pytest.mark.asyncio
async def test_peer_closing_and_close_fail_the_waiting_callback(
    fake_broker_factory: FakeFactory,
) -> None:
    received = asyncio.Event()

    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload | None:
        received.set()
        return None

    broker = await fake_broker_factory(handler=handler)
    answers = Answers()
    connection = connection_to(broker.port)
    try:
        await asyncio.wait_for(connection.connect(), BOUND_S)
        assert connection.request_soon(heartbeat_at(1), answers)
        await asyncio.wait_for(received.wait(), BOUND_S)
        broker.drop_connections()
        outcome = await answers.next()
        assert isinstance(outcome, KafkaConnectionError)
        assert "closed the connection" in str(outcome)
        assert not connection.is_connected
        await asyncio.wait_for(connection.connect(), BOUND_S)
        assert connection.request_soon(heartbeat_at(2), answers)
    finally:
        await connection.close()
    outcome = await answers.next()
    assert isinstance(outcome, KafkaConnectionError)
    assert "closed" in str(outcome)
    assert connection.request_soon(heartbeat_at(3), answers) is False


@pytest.mark.asyncio
async def test_an_undecodable_answer_is_a_protocol_error_and_drops_the_session(
    fake_broker_factory: FakeFactory,
) -> None:
    async def handler(header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        # A heartbeat response to a Metadata request: right correlation id, wrong schema.
        return echo_epoch(build_heartbeat_request(HeartbeatRequest("g", "m", 1), 1))

    broker = await fake_broker_factory(handler=handler)
    answers = Answers()
    async with connection_to(broker.port) as connection:
        await asyncio.wait_for(connection.connect(), BOUND_S)

        def metadata(_versions: NegotiatedVersions) -> RequestPayload:
            return build_metadata_request(12, [])

        assert connection.request_soon(metadata, answers)
        outcome = await answers.next()
        assert isinstance(outcome, ProtocolError)
        assert "Metadata" in str(outcome)
        assert not connection.is_connected
