"""FaultProxy.answer_with_error in front of a loopback echo server (no broker): a matched request
is answered by the proxy and never forwarded; everything else passes as whole frames.

The real-broker proof is tests/cluster/test_coordinator_loading.py.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.static.primitive import i32, i32Timedelta

from consumer._wire import FrameDecoder, decode_response_frame, encode_request_frame
from consumer.testing.real.proxy import FaultProxy

LOAD_IN_PROGRESS = 14


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    upstream = ("127.0.0.1", server.server_address[1])
    with FaultProxy(upstream, name="unit-frames", kafka_frames=True) as started:
        yield started
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _heartbeat(correlation_id: int) -> bytes:
    import datetime

    request = ConsumerGroupHeartbeatRequest(
        group_id=GroupId("g"),
        member_id="m",
        member_epoch=i32(0),
        instance_id=None,
        rack_id=None,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )
    return encode_request_frame(request, correlation_id=correlation_id, client_id="unit")


def _frames(sock: socket.socket, count: int) -> list[bytes]:
    decoder, frames = FrameDecoder(), []
    while len(frames) < count:
        data = sock.recv(65536)
        assert data, "the proxy closed the connection"
        frames += decoder.feed(data)
    return frames


def test_a_matched_request_is_answered_with_the_error_and_not_forwarded(
    proxy: FaultProxy,
) -> None:
    proxy.answer_with_error(68, LOAD_IN_PROGRESS)
    other = b"\x00\x00\x00\x06" + b"\x00\x03\x00\x00\x00\x07"  # a frame of another API key
    with socket.create_connection(proxy.address, timeout=5) as sock:
        request = _heartbeat(41)
        sock.sendall(request[:5])  # split mid-frame: the proxy waits for the whole frame
        sock.sendall(request[5:] + other)
        first, second = _frames(sock, 2)
        answered = [f for f in (first, second) if f != other[4:]]
        assert len(answered) == 1, "the other frame is echoed, the heartbeat is not"
        _, response = decode_response_frame(answered[0], ConsumerGroupHeartbeatResponse)
        assert response.error_code == ErrorCode.coordinator_load_in_progress
        assert int.from_bytes(answered[0][:4], "big") == 41
        assert proxy.stats().answered == 1
        proxy.heal()
        sock.sendall(_heartbeat(42))
        (echoed,) = _frames(sock, 1)
        assert echoed == _heartbeat(42)[4:], "after heal() the heartbeat is forwarded"


def test_answer_with_error_refuses_what_it_cannot_do(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="api_key must be one of"):
        proxy.answer_with_error(1, LOAD_IN_PROGRESS)
    with pytest.raises(ValueError, match="not a Kafka error code"):
        proxy.answer_with_error(68, 99999)
    plain = FaultProxy(proxy.upstream, name="plain")
    with pytest.raises(RuntimeError, match="kafka_frames=True"):
        plain.answer_with_error(68, LOAD_IN_PROGRESS)
