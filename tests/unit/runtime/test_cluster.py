"""ClusterClient against a fake broker: bootstrap, coordinator lookup and invalidation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v1 import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6 import FindCoordinatorRequest, FindCoordinatorResponse
from kio.schema.find_coordinator.v6.response import Coordinator
from kio.schema.metadata.v13 import MetadataResponse
from kio.schema.metadata.v13.response import MetadataResponseBroker
from kio.schema.types import BrokerId
from kio.static.primitive import i32
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from consumer._runtime.cluster import ClusterClient, parse_bootstrap_servers
from consumer._runtime.retry import NO_RETRY, RetryPolicy
from consumer._wire import build_heartbeat_request
from consumer._wire._units import i32_timedelta_from_ms
from consumer.errors import GroupAuthorizationFailedError, KafkaConnectionError, RetriableError
from consumer.member import HeartbeatRequest

FakeFactory = Callable[..., Awaitable[Any]]
ZERO_MS = i32_timedelta_from_ms(0)
NODE_ID = 7


class ScriptedBroker:
    """Answers Metadata with itself as node 7, FindCoordinator from a script, heartbeats with
    a scripted error code."""

    def __init__(self) -> None:
        self.port = 0
        self.coordinator_errors: list[ErrorCode] = []
        self.heartbeat_errors: list[ErrorCode] = []
        self.find_coordinator_calls = 0

    async def __call__(self, header: RequestHeader, request: RequestPayload) -> ResponsePayload:
        await asyncio.sleep(0)
        if isinstance(request, FindCoordinatorRequest):
            self.find_coordinator_calls += 1
            code = self.coordinator_errors.pop(0) if self.coordinator_errors else ErrorCode.none
            return FindCoordinatorResponse(
                throttle_time=ZERO_MS,
                coordinators=tuple(
                    Coordinator(
                        key=key,
                        node_id=BrokerId(NODE_ID),
                        host="127.0.0.1",
                        port=i32(self.port),
                        error_code=code,
                        error_message=None,
                    )
                    for key in request.coordinator_keys
                ),
            )
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            code = self.heartbeat_errors.pop(0) if self.heartbeat_errors else ErrorCode.none
            return ConsumerGroupHeartbeatResponse(
                throttle_time=ZERO_MS,
                error_code=code,
                member_id=request.member_id,
                member_epoch=i32(1),
                heartbeat_interval=i32_timedelta_from_ms(500),
            )
        return MetadataResponse(
            throttle_time=ZERO_MS,
            brokers=(
                MetadataResponseBroker(
                    node_id=BrokerId(NODE_ID), host="127.0.0.1", port=i32(self.port)
                ),
            ),
            cluster_id="fake",
            controller_id=BrokerId(NODE_ID),
            topics=(),
            error_code=ErrorCode.none,
        )


FAST_LOOKUP = RetryPolicy(
    max_attempts=5,
    initial_backoff_ms=1,
    max_backoff_ms=2,
    retry_on=(KafkaConnectionError, RetriableError),
)


async def _start(
    factory: FakeFactory, lookup_retry: RetryPolicy = FAST_LOOKUP
) -> tuple[ScriptedBroker, ClusterClient]:
    script = ScriptedBroker()
    broker = await factory(handler=script)
    script.port = broker.port
    client = ClusterClient(
        f"127.0.0.1:{broker.port}",
        request_timeout_ms=2_000,
        connect_retry=NO_RETRY,
        lookup_retry=lookup_retry,
    )
    return script, client


def _heartbeat() -> RequestPayload:
    return build_heartbeat_request(HeartbeatRequest(group_id="g", member_id="m", member_epoch=1), 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("h:1", [("h", 1)]),
        ("a:1, b:2,", [("a", 1), ("b", 2)]),
        (["[::1]:9092"], [("::1", 9092)]),
    ],
)
def test_parse_bootstrap_servers(text: str | list[str], expected: list[tuple[str, int]]) -> None:
    assert parse_bootstrap_servers(text) == expected


@pytest.mark.parametrize("bad", ["", "host", "host:port", ":9092"])
def test_parse_bootstrap_servers_rejects_bad_entries(bad: str) -> None:
    with pytest.raises(ValueError, match="bootstrap"):
        parse_bootstrap_servers(bad)


@pytest.mark.asyncio
async def test_start_learns_brokers_and_reuses_the_bootstrap_connection(
    fake_broker_factory: FakeFactory,
) -> None:
    script, client = await _start(fake_broker_factory)
    async with client:
        assert set(client.brokers) == {NODE_ID}
        connection = await asyncio.wait_for(client.connection_to(NODE_ID), 5)
        assert connection.node_id == NODE_ID
        assert await asyncio.wait_for(client.connection_to(NODE_ID), 5) is connection


@pytest.mark.asyncio
async def test_find_coordinator_retries_retriable_errors_and_caches(
    fake_broker_factory: FakeFactory,
) -> None:
    script, client = await _start(fake_broker_factory)
    script.coordinator_errors = [ErrorCode.coordinator_not_available] * 2
    async with client:
        coordinator = await asyncio.wait_for(client.find_coordinator("g"), 5)
        assert coordinator.node_id == NODE_ID
        assert script.find_coordinator_calls == 3
        await client.find_coordinator("g")
        assert script.find_coordinator_calls == 3  # cached


@pytest.mark.asyncio
async def test_find_coordinator_raises_fatal_errors_typed(fake_broker_factory: FakeFactory) -> None:
    script, client = await _start(fake_broker_factory)
    script.coordinator_errors = [ErrorCode.group_authorization_failed]
    async with client:
        with pytest.raises(GroupAuthorizationFailedError):
            await asyncio.wait_for(client.find_coordinator("g"), 5)
        assert script.find_coordinator_calls == 1  # not retried


@pytest.mark.asyncio
async def test_not_coordinator_response_forgets_the_coordinator(
    fake_broker_factory: FakeFactory,
) -> None:
    script, client = await _start(fake_broker_factory)
    script.heartbeat_errors = [ErrorCode.not_coordinator]
    async with client:
        response = await asyncio.wait_for(client.coordinator_request("g", _heartbeat()), 5)
        assert response.error_code == ErrorCode.not_coordinator  # type: ignore[union-attr]
        assert script.find_coordinator_calls == 1
        await asyncio.wait_for(client.coordinator_request("g", lambda v: _heartbeat()), 5)
        assert script.find_coordinator_calls == 2  # looked up again


@pytest.mark.asyncio
async def test_closed_client_refuses_work(fake_broker_factory: FakeFactory) -> None:
    script, client = await _start(fake_broker_factory)
    await client.start()
    await client.close()
    with pytest.raises(KafkaConnectionError, match="closed"):
        await client.metadata()


@pytest.mark.asyncio
@pytest.mark.parametrize("separate", [False, True])
async def test_coordinator_requests_use_their_own_connection_only_when_asked(
    fake_broker_factory: FakeFactory, separate: bool
) -> None:
    script = ScriptedBroker()
    broker = await fake_broker_factory(handler=script)
    script.port = broker.port
    client = ClusterClient(
        f"127.0.0.1:{broker.port}",
        request_timeout_ms=2_000,
        connect_retry=NO_RETRY,
        lookup_retry=FAST_LOOKUP,
        separate_coordinator_connection=separate,
    )
    async with client:
        data = await asyncio.wait_for(client.connection_to(NODE_ID), 5)
        coordinator = await asyncio.wait_for(client.coordinator_connection("g"), 5)
        assert (coordinator is not data) is separate
        assert await asyncio.wait_for(client.coordinator_connection("g"), 5) is coordinator
        assert await asyncio.wait_for(client.connection_to(NODE_ID), 5) is data
        response = await asyncio.wait_for(client.coordinator_request("g", _heartbeat()), 5)
        assert response.error_code == ErrorCode.none  # type: ignore[union-attr]
    assert not coordinator.is_connected, "close() closes the coordinator connection too"
    assert not data.is_connected
