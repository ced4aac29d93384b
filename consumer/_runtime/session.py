"""One TCP session to a Kafka broker: an :class:`asyncio.Protocol` that cuts the received bytes
into response frames and hands each one to whatever registered its correlation id, and how the
session fails.

Frames are parsed in ``data_received``, in the socket's own read callback: no reader task, no
``StreamReader``. What waits for a response is either a future (an ordinary request awaits it)
or a :class:`FrameWaiter` callback (the background loop's heartbeat, which needs no task).

:class:`~consumer._runtime.connection.BrokerConnection` opens sessions, negotiates versions and
authenticates on them; this module only moves frames and reports failures (see the connection's
failure rules).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final, Protocol, cast

from consumer._logging import routed_logger
from consumer._wire import FrameDecoder, NegotiatedVersions, peek_correlation_id
from consumer.errors import ConsumerError, KafkaConnectionError, ProtocolError

__all__ = ["FrameWaiter", "Session", "copy_error"]

_log = routed_logger("consumer._runtime.connection")
_CLOSE_WAIT_S: Final = 1.0
_MAX_CORRELATION_ID: Final = 2**31 - 1


class FrameWaiter(Protocol):
    """A callback-style waiter for one response frame (instead of a future)."""

    def frame_arrived(self, frame: bytes) -> None:
        """The response frame (size prefix removed) has arrived."""

    def session_failed(self, error: ConsumerError) -> None:
        """The session failed before the response came (``error`` is this waiter's own copy)."""


class Session(asyncio.Protocol):
    """One TCP connection: its transport, its frame decoder and the requests awaiting responses.

    Created by ``loop.create_connection(lambda: Session(...), ...)`` (plain TCP or TLS alike).
    """

    def __init__(self, address: str, max_frame_bytes: int) -> None:
        self.address = address
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder(max_frame_bytes)
        self.pending: dict[int, asyncio.Future[bytes] | FrameWaiter] = {}
        self.failure: ConsumerError | None = None
        self.versions: NegotiatedVersions | None = None
        #: Cleared while SASL re-authentication runs: other requests wait for it (KIP-368).
        self.open_for_requests = asyncio.Event()
        self.open_for_requests.set()
        self.reauth_task: asyncio.Task[None] | None = None
        self._next_correlation_id = 0
        loop = asyncio.get_running_loop()
        #: Resolved when the transport is gone (``connection_lost``).
        self.lost: asyncio.Future[None] = loop.create_future()
        self._write_resumed: asyncio.Future[None] | None = None
        self._write_paused = False

    @property
    def alive(self) -> bool:
        return self.failure is None

    def allocate_correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        return correlation_id

    def write(self, data: bytes) -> None:
        """Queue ``data`` on the transport (raises the session's failure if it is dead)."""
        transport = self.transport
        if self.failure is not None or transport is None:
            raise copy_error(self.failure or KafkaConnectionError(f"{self.address} is closed"))
        transport.write(data)

    async def drain(self) -> None:
        """Wait until the transport accepts more data (flow control); at once when it does."""
        if not self._write_paused:
            return
        if self._write_resumed is None or self._write_resumed.done():
            self._write_resumed = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._write_resumed)
        if self.failure is not None:
            raise copy_error(self.failure)

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: asyncio's own, or an event-loop library's (uvloop's TCP transport
        # implements the same methods but is not a subclass of asyncio.Transport).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.failure is not None:
            return
        try:
            for frame in self.decoder.feed(data):
                self._deliver(frame)
        except ConsumerError as error:
            self.fail(error)

    def eof_received(self) -> bool:
        partial = self.decoder.buffered_bytes
        self.fail(
            KafkaConnectionError(
                f"{self.address} closed the connection"
                + (f" in the middle of a frame ({partial} bytes buffered)" if partial else "")
            )
        )
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, OSError):
            self.fail(KafkaConnectionError(f"connection to {self.address} failed: {exc}"))
        else:
            self.fail(KafkaConnectionError(f"{self.address} closed the connection"))
        if not self.lost.done():
            self.lost.set_result(None)
        self._resume()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._resume()

    # -- internals -------------------------------------------------------------------------

    def _resume(self) -> None:
        waiter = self._write_resumed
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _deliver(self, frame: bytes) -> None:
        correlation_id = peek_correlation_id(frame)
        waiter = self.pending.pop(correlation_id, None)
        if waiter is None:
            raise ProtocolError(
                f"{self.address} sent a response with correlation id {correlation_id}, "
                "which matches no request in flight -- is this a Kafka broker?"
            )
        if isinstance(waiter, asyncio.Future):
            if not waiter.done():  # a cancelled caller leaves a done future behind
                waiter.set_result(frame)
        else:
            waiter.frame_arrived(frame)

    def fail(self, error: ConsumerError) -> None:
        """Mark the session dead, fail every waiting request, and close the socket."""
        if self.failure is None:
            self.failure = error
            _log.debug("session to %s failed: %s", self.address, error)
        waiters = list(self.pending.values())
        self.pending.clear()
        for waiter in waiters:
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_exception(copy_error(error))
            else:
                waiter.session_failed(copy_error(error))
        if self.transport is not None:
            self.transport.close()

    async def shutdown(self, error: ConsumerError) -> None:
        """Fail the session, cancel the re-authentication task (unless we are it), and wait
        (briefly) for the transport to close."""
        self.fail(error)
        reauth = self.reauth_task
        if reauth is not None and reauth is not asyncio.current_task():
            reauth.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reauth
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.lost), _CLOSE_WAIT_S)


def copy_error(error: ConsumerError) -> ConsumerError:
    """A fresh instance per waiter, so tracebacks of different tasks do not pile up."""
    try:
        return type(error)(*error.args)
    except TypeError:
        return error
