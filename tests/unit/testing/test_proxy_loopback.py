"""FaultProxy in front of a loopback echo server (no broker): forwarding, faults, counters.

The real-broker proof is tests/integration/test_fault_proxy.py; these pin the byte-level
behaviour quickly. Timeouts on ``recv`` are the bounded way to observe that nothing arrives.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from consumer.testing.real.broker import free_port
from consumer.testing.real.proxy import FaultProxy, ProxiedBroker


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield ("127.0.0.1", server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def proxy(echo: tuple[str, int]) -> Iterator[FaultProxy]:
    with FaultProxy(echo, name="unit") as started:
        yield started


def _connect(proxy: FaultProxy, timeout_s: float = 5.0) -> socket.socket:
    sock = socket.create_connection(proxy.address, timeout=timeout_s)
    return sock


def _connect_and_read(address: tuple[str, int]) -> bytes:
    with socket.create_connection(address, timeout=5) as sock:
        return sock.recv(1)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed early")
        data += chunk
    return data


def test_forwards_both_ways_and_counts(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"hello" * 1000)
        assert _recv_exactly(sock, 5000) == b"hello" * 1000
        stats = proxy.wait_for(lambda s: s.bytes_down == 5000, timeout_s=5)
    assert (stats.accepted, stats.active, stats.bytes_up) == (1, 1, 5000)
    assert proxy.wait_for(lambda s: s.active == 0, timeout_s=5).accepted == 1


def test_delay_is_added_in_each_direction(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"x")
        _recv_exactly(sock, 1)
        proxy.delay(100)
        assert proxy.delay_ms == 100
        started = time.perf_counter()
        sock.sendall(b"y")
        assert _recv_exactly(sock, 1) == b"y"
        assert time.perf_counter() - started >= 0.19  # 100 ms up + 100 ms down
        proxy.delay(0)
        started = time.perf_counter()
        sock.sendall(b"z")
        _recv_exactly(sock, 1)
        assert time.perf_counter() - started < 0.1


def test_delay_keeps_order_and_does_not_cap_throughput(proxy: FaultProxy) -> None:
    proxy.delay(50)
    payload = bytes(range(256)) * 4096  # 1 MiB, many chunks
    with _connect(proxy, timeout_s=10) as sock:
        started = time.perf_counter()
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        assert _recv_exactly(sock, len(payload)) == payload
        sender.join(timeout=10)
        assert time.perf_counter() - started < 5  # not 50 ms per chunk in sequence


def test_blackhole_holds_bytes_until_heal(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        proxy.blackhole()
        assert proxy.mode == "blackhole"
        sock.sendall(b"held")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(4)
        with _connect(proxy) as late:  # new connections are accepted, and stall too
            late.sendall(b"late")
            late.settimeout(0.3)
            with pytest.raises(TimeoutError):
                late.recv(4)
            assert proxy.stats().active == 2
            proxy.heal()
            late.settimeout(5)
            assert _recv_exactly(late, 4) == b"late"
        sock.settimeout(5)
        assert _recv_exactly(sock, 4) == b"held"


def test_drop_resets_open_connections_and_new_ones_until_heal(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"a")
        _recv_exactly(sock, 1)
        proxy.drop()
        with pytest.raises(ConnectionResetError):
            sock.recv(1)  # the RST is already there: drop() returns once it was sent
    assert proxy.wait_for(lambda s: s.active == 0, timeout_s=5).accepted == 1
    with pytest.raises(ConnectionResetError):  # at connect or at the first read
        _connect_and_read(proxy.address)
    assert proxy.wait_for(lambda s: s.refused == 1, timeout_s=5).accepted == 1
    proxy.heal()
    with _connect(proxy) as healed:
        healed.sendall(b"d")
        assert _recv_exactly(healed, 1) == b"d"


def test_a_client_close_reaches_upstream(proxy: FaultProxy) -> None:
    sock = _connect(proxy)
    sock.sendall(b"x")
    _recv_exactly(sock, 1)
    sock.close()
    assert proxy.wait_for(lambda s: s.active == 0, timeout_s=5).accepted == 1


def test_unreachable_upstream_resets_the_client() -> None:
    with FaultProxy(("127.0.0.1", free_port())) as proxy:
        with pytest.raises(ConnectionResetError):  # at connect or at the first read
            _connect_and_read(proxy.address)
        assert proxy.wait_for(lambda s: s.refused == 1, timeout_s=5).accepted == 0


def test_faults_set_before_start_apply_from_the_start(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo)
    proxy.blackhole()
    with proxy, _connect(proxy) as sock:
        sock.sendall(b"x")
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(1)


def test_stop_closes_the_port(echo: tuple[str, int]) -> None:
    with FaultProxy(echo) as proxy:
        address = proxy.address
        connected = _connect(proxy)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=2).close()
    connected.settimeout(5)
    assert connected.recv(1) == b""
    connected.close()


def test_misuse_is_refused(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo)
    with pytest.raises(RuntimeError, match="not started"):
        _ = proxy.address
    with pytest.raises(ValueError, match=">= 0"):
        proxy.delay(-1)
    with proxy:
        with pytest.raises(RuntimeError, match="already started"):
            proxy.start()
        with pytest.raises(TimeoutError, match="condition not met"):
            proxy.wait_for(lambda s: s.accepted > 0, timeout_s=0.05)
    with pytest.raises(ValueError, match="distinct member names"):
        ProxiedBroker(["a-1", "A_1"])


def test_port_in_use_is_reported(echo: tuple[str, int]) -> None:
    with FaultProxy(echo) as first, pytest.raises(OSError, match="(?i)address already in use"):
        FaultProxy(echo, listen_port=first.address[1]).start()


def test_proxied_broker_advertises_each_member_at_its_proxy() -> None:
    cluster = ProxiedBroker(["m-1", "m2"])  # not started: only its settings are checked
    props = cluster.broker.overrides
    m1, m2 = cluster.proxy("m-1").address[1], cluster.proxy("m2").address[1]
    assert f"M_M_1://127.0.0.1:{m1}" in props["advertised.listeners"]
    assert f"M_M2://127.0.0.1:{m2}" in props["advertised.listeners"]
    assert props["advertised.listeners"].startswith(f"PLAINTEXT://127.0.0.1:{cluster.broker.port}")
    assert "M_M_1:PLAINTEXT" in props["listener.security.protocol.map"]
    upstream = cluster.proxy("m-1").upstream[1]
    assert f"M_M_1://127.0.0.1:{upstream}" in props["listeners"]
    assert cluster.bootstrap_servers("m2") == f"127.0.0.1:{m2}"
    assert cluster.direct_bootstrap_servers == cluster.broker.bootstrap_servers
