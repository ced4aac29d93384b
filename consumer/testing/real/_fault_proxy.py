"""The fault proxy itself (:class:`FaultProxy`), re-exported by
:mod:`consumer.testing.real.proxy`, whose docstring describes the faults."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from kio.schema.errors import ErrorCode

from consumer.testing.real._answering import FramedLink, check_rule
from consumer.testing.real._service import Service

__all__ = ["FaultProxy", "ProxyStats"]

_Outbox = asyncio.Queue[tuple[float, bytes]]

_CHUNK_BYTES = 64 * 1024
_QUEUED_CHUNKS = 256
_CONTROL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ProxyStats:
    """Counters of one proxy since it started."""

    accepted: int  # client connections forwarded upstream
    active: int  # of those, still open
    refused: int  # client connections reset at once (during drop(), or upstream unreachable)
    bytes_up: int  # forwarded client -> upstream
    bytes_down: int  # forwarded upstream -> client
    answered: int = 0  # requests answered by the proxy itself (answer_with_error)


def _linger_zero(sock: socket.socket | Any) -> None:
    """Make the next close send RST instead of FIN, as a crashed peer or a firewall would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close a stream with RST."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        _linger_zero(sock)
    writer.transport.abort()


class FaultProxy(Service):
    """A TCP proxy on ``127.0.0.1`` in front of ``upstream``, with run-time faults.

    ``listen_port`` 0 picks a free port. Use as a context manager or call :meth:`start` and
    :meth:`stop`. Fault methods may be called from any thread (not from the proxy's own loop) and
    return once the fault is in force.
    """

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        listen_port: int = 0,
        name: str = "proxy",
        kafka_frames: bool = False,
    ):
        self.upstream = upstream
        self.name = name
        self._listen_port = listen_port
        self._kafka_frames = kafka_frames
        self._answer: tuple[int, ErrorCode] | None = None
        self._delay_s = 0.0
        self._mode = "open"  # "open" | "blackhole" | "drop"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._flowing: asyncio.Event | None = None
        self._stopping: asyncio.Event | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._stats = ProxyStats(0, 0, 0, 0, 0)
        self._changed = threading.Condition()

    # -- public API ------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """``("127.0.0.1", port)`` clients connect to (known once started)."""
        if not self._listen_port:
            raise RuntimeError(f"{self.name} is not started")
        return ("127.0.0.1", self._listen_port)

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the proxy, for a client's ``bootstrap.servers``."""
        host, port = self.address
        return f"{host}:{port}"

    @property
    def mode(self) -> str:
        """``"open"``, ``"blackhole"`` or ``"drop"``."""
        return self._mode

    @property
    def delay_ms(self) -> int:
        """Latency currently added to each chunk, in milliseconds."""
        return round(self._delay_s * 1000)

    def stats(self) -> ProxyStats:
        """A snapshot of the counters."""
        with self._changed:
            return self._stats

    def wait_for(self, condition: Callable[[ProxyStats], bool], timeout_s: float) -> ProxyStats:
        """Block until ``condition(stats)`` holds (re-checked on every change) and return the
        stats; raise ``TimeoutError`` after ``timeout_s``."""
        with self._changed:
            if not self._changed.wait_for(lambda: condition(self._stats), timeout_s):
                raise TimeoutError(
                    f"{self.name}: condition not met in {timeout_s} s: {self._stats}"
                )
            return self._stats

    def delay(self, ms: float) -> None:
        """Add ``ms`` milliseconds of latency to every chunk, both directions (0 removes it)."""
        if ms < 0:
            raise ValueError("delay must be >= 0 ms")
        self._control(lambda: setattr(self, "_delay_s", ms / 1000))

    def blackhole(self) -> None:
        """Keep connections open (and accept new ones) but forward nothing until heal()."""
        self._control(self._do_blackhole)

    def drop(self) -> None:
        """Reset every connection now and every new one until heal()."""
        self._control(self._do_drop)

    def heal(self) -> None:
        """End blackhole(), drop() or answer_with_error(); held bytes flow again. The delay is
        kept."""
        self._control(self._do_heal)

    def answer_with_error(self, api_key: int, error_code: int) -> None:
        """Answer every request with ``api_key`` (68: ConsumerGroupHeartbeat, 76:
        ShareGroupHeartbeat) with ``error_code`` and nothing else, without forwarding it, until
        heal(): e.g. 14 (COORDINATOR_LOAD_IN_PROGRESS), as a coordinator still loading its
        ``__consumer_offsets`` partition answers. Needs ``kafka_frames=True`` (the proxy then
        forwards whole Kafka frames only)."""
        if not self._kafka_frames:
            raise RuntimeError(f"{self.name}: answer_with_error needs kafka_frames=True")
        rule = check_rule(api_key, error_code)
        self._control(lambda: setattr(self, "_answer", rule))

    def start(self) -> Self:
        """Bind the listening port and start forwarding (in a daemon thread)."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(started, failure))
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name=f"FaultProxy-{self.name}", daemon=True)
        self._thread.start()
        if not started.wait(_CONTROL_TIMEOUT_S):
            raise RuntimeError(f"{self.name} did not start within {_CONTROL_TIMEOUT_S} s")
        if failure:
            self._thread.join(_CONTROL_TIMEOUT_S)
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close every connection and the listening port; wait for the thread to end."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or loop is None or stopping is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(stopping.set)
        thread.join(_CONTROL_TIMEOUT_S)
        self._thread = None

    def __repr__(self) -> str:
        return (
            f"FaultProxy({self.name!r}, port={self._listen_port}, upstream={self.upstream}, "
            f"mode={self._mode}, delay_ms={self.delay_ms})"
        )

    # -- control (runs on the proxy's loop) ------------------------------------------------

    def _control(self, action: Callable[[], None]) -> None:
        loop = self._loop
        if self._thread is None or loop is None:
            action()  # not started: just record the setting
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError("FaultProxy faults cannot be changed from the proxy's own thread")

        async def apply() -> None:
            action()

        asyncio.run_coroutine_threadsafe(apply(), loop).result(_CONTROL_TIMEOUT_S)

    def _do_blackhole(self) -> None:
        self._mode = "blackhole"
        if self._flowing is not None:
            self._flowing.clear()

    def _do_drop(self) -> None:
        self._mode = "drop"
        for client, upstream in list(self._links):
            _reset(client)
            _reset(upstream)

    def _do_heal(self) -> None:
        self._mode = "open"
        self._answer = None
        if self._flowing is not None:
            self._flowing.set()

    # -- forwarding ------------------------------------------------------------------------

    def _count(self, **deltas: int) -> None:
        with self._changed:
            values = {k: getattr(self._stats, k) + deltas.get(k, 0) for k in deltas}
            self._stats = ProxyStats(**{**self._stats.__dict__, **values})
            self._changed.notify_all()

    async def _serve(self, started: threading.Event, failure: list[BaseException]) -> None:
        # A hand-made accept loop rather than asyncio.start_server: closing a Server while a
        # connection is half-accepted leaks that socket on Python 3.11 (and cancelling
        # sock_accept can lose one); stop() must close every socket.
        self._flowing = asyncio.Event()
        if self._mode != "blackhole":
            self._flowing.set()
        self._stopping = asyncio.Event()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self._listen_port))
            listener.listen(128)
            listener.setblocking(False)
        except OSError as exc:
            listener.close()
            failure.append(exc)
            started.set()
            return
        self._listen_port = listener.getsockname()[1]
        started.set()
        conns: set[socket.socket] = set()
        handlers: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()

        def forget(done: asyncio.Task[None], conn: socket.socket) -> None:
            handlers.discard(done)
            conns.discard(conn)
            conn.close()  # no-op if its transport closed it; needed if cancelled before start

        def on_readable() -> None:  # accepts synchronously, so no accepted socket is ever lost
            while True:
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    return
                conn.setblocking(False)
                conns.add(conn)
                task = loop.create_task(self._handle(conn))
                handlers.add(task)
                task.add_done_callback(functools.partial(forget, conn=conn))

        loop.add_reader(listener, on_readable)
        await self._stopping.wait()
        loop.remove_reader(listener)
        listener.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        for _ in range(3):  # transports release their sockets in callbacks: let those run
            await asyncio.sleep(0)
        for conn in list(conns):
            conn.close()

    async def _handle(self, conn: socket.socket) -> None:
        writer: asyncio.StreamWriter | None = None
        up_writer: asyncio.StreamWriter | None = None
        try:
            if self._mode != "drop":
                reader, writer = await asyncio.open_connection(sock=conn)
                with contextlib.suppress(OSError):
                    up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            if writer is None or up_writer is None or self._mode == "drop":
                _linger_zero(conn)  # refused, or dropped meanwhile: reset the client
                self._count(refused=1)
                return
            await self._forward(reader, writer, up_reader, up_writer)
        finally:  # also on cancellation (stop): never leave a socket open
            if writer is not None:
                writer.transport.abort()
            else:
                conn.close()
            if up_writer is not None:
                up_writer.transport.abort()

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        link = (writer, up_writer)
        self._links.add(link)
        self._count(accepted=1, active=1)
        to_upstream: _Outbox = asyncio.Queue(_QUEUED_CHUNKS)
        to_client: _Outbox = asyncio.Queue(_QUEUED_CHUNKS)
        framed = FramedLink(lambda: self._answer) if self._kafka_frames else None

        def from_client(data: bytes) -> list[tuple[_Outbox, bytes]]:
            if framed is None or not data:
                return [(to_upstream, data)]
            forward, answers = framed.from_client(data)
            if answers:
                self._count(answered=len(answers))
            return [(to_upstream, forward), (to_client, b"".join(answers))]

        def from_upstream(data: bytes) -> list[tuple[_Outbox, bytes]]:
            if framed is None or not data:
                return [(to_client, data)]
            return [(to_client, framed.from_upstream(data))]

        writers = [
            asyncio.create_task(self._write(to_upstream, up_writer, "bytes_up")),
            asyncio.create_task(self._write(to_client, writer, "bytes_down")),
        ]
        readers = [
            asyncio.create_task(self._read(reader, from_client)),
            asyncio.create_task(self._read(up_reader, from_upstream)),
        ]
        try:
            waiting = {*writers, *readers}
            # A writer ends the link (end of stream, or writing failed); so does a reader that
            # failed (bytes that are not Kafka frames); a reader at end of stream does not: its
            # writer still has to pass the end on.
            while True:
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if any(task in writers or task.exception() is not None for task in done):
                    break
        finally:
            for task in (*writers, *readers):
                task.cancel()
            await asyncio.gather(*writers, *readers, return_exceptions=True)
            self._links.discard(link)
            self._count(active=-1)

    async def _read(
        self, reader: asyncio.StreamReader, route: Callable[[bytes], list[tuple[_Outbox, bytes]]]
    ) -> None:
        """Read one direction; each chunk ``route`` returns is due ``delay`` after it was read
        (b"" is the end of the stream and always passed on)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await reader.read(_CHUNK_BYTES)
            except OSError:
                data = b""
            for outbox, chunk in route(data):
                if chunk or not data:
                    await outbox.put((loop.time() + self._delay_s, chunk))
            if not data:
                return

    async def _write(self, outbox: _Outbox, writer: asyncio.StreamWriter, counter: str) -> None:
        """Write one direction's chunks when due and while no blackhole holds them (order kept);
        returns at the end of the stream or when writing fails."""
        loop = asyncio.get_running_loop()
        assert self._flowing is not None
        flowing = self._flowing
        while True:
            due, data = await outbox.get()
            wait_s = due - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            await flowing.wait()
            if not data:
                return  # end of stream: the caller closes both sides
            writer.write(data)
            try:
                await writer.drain()
            except OSError:
                return
            self._count(**{counter: len(data)})
