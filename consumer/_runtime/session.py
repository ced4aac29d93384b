"""One TCP session to a Kafka broker: its streams, the reader task that hands each response
frame to the request waiting for its correlation id, and how the session fails.

:class:`~consumer._runtime.connection.BrokerConnection` opens sessions, negotiates versions and
authenticates on them; this module only moves frames and reports failures (see the connection's
failure rules).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from consumer._logging import routed_logger
from consumer._wire import FrameDecoder, NegotiatedVersions, peek_correlation_id
from consumer.errors import ConsumerError, KafkaConnectionError, ProtocolError

__all__ = ["Session", "copy_error"]

_log = routed_logger("consumer._runtime.connection")
_READ_CHUNK_BYTES: Final = 64 * 1024
_CLOSE_WAIT_S: Final = 1.0
_MAX_CORRELATION_ID: Final = 2**31 - 1


class Session:
    """One TCP connection: its streams, the reader task and the requests awaiting responses."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: str,
        max_frame_bytes: int,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.address = address
        self.decoder = FrameDecoder(max_frame_bytes)
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.failure: ConsumerError | None = None
        self.versions: NegotiatedVersions | None = None
        #: Cleared while SASL re-authentication runs: other requests wait for it (KIP-368).
        self.open_for_requests = asyncio.Event()
        self.open_for_requests.set()
        self.reauth_task: asyncio.Task[None] | None = None
        self._next_correlation_id = 0
        self.reader_task = asyncio.create_task(self._read_loop(), name=f"kafka-reader {address}")

    @property
    def alive(self) -> bool:
        return self.failure is None

    def allocate_correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        return correlation_id

    async def _read_loop(self) -> None:
        try:
            while True:
                chunk = await self.reader.read(_READ_CHUNK_BYTES)
                if not chunk:
                    partial = self.decoder.buffered_bytes
                    raise KafkaConnectionError(
                        f"{self.address} closed the connection"
                        + (
                            f" in the middle of a frame ({partial} bytes buffered)"
                            if partial
                            else ""
                        )
                    )
                for frame in self.decoder.feed(chunk):
                    self._deliver(frame)
        except ConsumerError as error:
            self.fail(error)
        except OSError as error:
            self.fail(KafkaConnectionError(f"connection to {self.address} failed: {error}"))

    def _deliver(self, frame: bytes) -> None:
        correlation_id = peek_correlation_id(frame)
        future = self.pending.pop(correlation_id, None)
        if future is None:
            raise ProtocolError(
                f"{self.address} sent a response with correlation id {correlation_id}, "
                "which matches no request in flight -- is this a Kafka broker?"
            )
        if not future.done():  # a cancelled caller leaves a done future behind
            future.set_result(frame)

    def fail(self, error: ConsumerError) -> None:
        """Mark the session dead, fail every waiting request, and close the socket."""
        if self.failure is None:
            self.failure = error
            _log.debug("session to %s failed: %s", self.address, error)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(copy_error(error))
        self.pending.clear()
        self.writer.close()

    async def shutdown(self, error: ConsumerError) -> None:
        """Fail the session, then cancel and await the reader and re-authentication tasks
        (unless we are one of them)."""
        self.fail(error)
        reauth = self.reauth_task
        if reauth is not None and reauth is not asyncio.current_task():
            reauth.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reauth
        if self.reader_task is not asyncio.current_task():
            self.reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader_task
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), _CLOSE_WAIT_S)


def copy_error(error: ConsumerError) -> ConsumerError:
    """A fresh instance per waiter, so tracebacks of different tasks do not pile up."""
    try:
        return type(error)(*error.args)
    except TypeError:
        return error
