"""The answer of one request sent without a task (``BrokerConnection.request_soon``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kio.static.protocol import RequestPayload, ResponsePayload

from consumer._wire import api_label, response_type_for
from consumer.errors import ConsumerError, KafkaConnectionError, KafkaTimeoutError, ProtocolError

from .session import Session, copy_error

__all__ = ["AnswerWaiter"]


class AnswerWaiter:
    """The session's waiter for one ``BrokerConnection.request_soon``: decodes the frame, or
    reports the session's failure or the timeout, to the caller's callback.

    ``decode`` turns a response frame into the response of a type; ``drop`` ends the session
    with an error (a bad frame or a timeout leaves the byte stream untrustworthy); ``address``
    names the broker in messages.
    """

    __slots__ = (
        "_address",
        "_correlation_id",
        "_decode",
        "_drop",
        "_on_answer",
        "_request",
        "_session",
        "_timeout_ms",
        "_timer",
    )

    def __init__(
        self,
        session: Session,
        correlation_id: int,
        request: RequestPayload,
        on_answer: Callable[[ResponsePayload | ConsumerError], None],
        timeout_ms: int,
        *,
        decode: Callable[[bytes, type[ResponsePayload]], ResponsePayload],
        drop: Callable[[Session, ConsumerError], None],
        address: str,
    ) -> None:
        self._decode = decode
        self._drop = drop
        self._address = address
        self._session = session
        self._correlation_id = correlation_id
        self._request = request
        self._on_answer = on_answer
        self._timeout_ms = timeout_ms
        self._timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._timed_out)

    def frame_arrived(self, frame: bytes) -> None:
        self._timer.cancel()
        try:
            response = self._decode(frame, response_type_for(type(self._request)))
        except ProtocolError as error:
            self._drop(self._session, error)
            self._on_answer(copy_error(error))
            return
        self._on_answer(response)

    def session_failed(self, error: ConsumerError) -> None:
        self._timer.cancel()
        self._on_answer(error)

    def _timed_out(self) -> None:
        session = self._session
        if session.pending.get(self._correlation_id) is not self:
            return
        del session.pending[self._correlation_id]
        request = self._request
        what = f"{api_label(int(request.__api_key__))} v{request.__version__}"
        address = self._address
        self._drop(
            session,
            KafkaConnectionError(
                f"connection to {address} dropped: {what} timed out after {self._timeout_ms} ms"
            ),
        )
        self._on_answer(
            KafkaTimeoutError(f"{what} to {address} got no response within {self._timeout_ms} ms")
        )
