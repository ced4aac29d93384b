"""The background loop's heartbeats that need no task: written from the loop's turn over the
coordinator's open connection, answered in the socket's read callback.

An idle member's heartbeat costs two loop callbacks this way (the timer's turn that sends it,
the socket's read that feeds its answer and runs the next turn right there), with no task step
and no ``asyncio.timeout``. The leave heartbeat, and any heartbeat that cannot go out this way
(no open connection yet, say), is sent by a task as every other request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from consumer._runtime.group_requests import GroupRequests, HeartbeatAnswer
from consumer.member import SendHeartbeat

__all__ = ["TaskFreeHeartbeats"]

#: Lower bound of a heartbeat's answer timeout (see TaskFreeHeartbeats.timeout_ms).
_MIN_HEARTBEAT_TIMEOUT_MS = 3_000


class TaskFreeHeartbeats:
    """Sends heartbeats without a task and feeds their answers (see the module docstring).

    ``interval_ms`` reads the member's heartbeat interval; ``request_timeout_ms`` caps the
    answer's timeout; ``clock_ms`` is the loop's clock (the member's deadlines). An answer is
    given to ``feed`` and then ``after_answer`` runs (the loop's next turn); an exception from
    either, or from handling the answer before it was fed, is a runtime bug handed to ``fail``.
    """

    __slots__ = (
        "_after_answer",
        "_answer_due_ms",
        "_clock_ms",
        "_drained",
        "_fail",
        "_feed",
        "_interval_ms",
        "_request_timeout_ms",
        "_requests",
        "ended",
        "in_flight",
    )

    def __init__(
        self,
        requests: GroupRequests,
        *,
        interval_ms: Callable[[], int],
        request_timeout_ms: int,
        clock_ms: Callable[[], int],
        feed: Callable[[HeartbeatAnswer], None],
        after_answer: Callable[[], None],
        fail: Callable[[BaseException], None],
    ) -> None:
        self._requests = requests
        self._interval_ms = interval_ms
        self._request_timeout_ms = request_timeout_ms
        self._clock_ms = clock_ms
        #: When the answer of the last heartbeat sent is due at the latest (its timeout).
        self._answer_due_ms = 0
        self._feed = feed
        self._after_answer = after_answer
        self._fail = fail
        self._drained: asyncio.Future[None] | None = None
        #: Heartbeats sent by :meth:`send` whose answer (or failure) is still due.
        self.in_flight = 0
        #: Set when the loop has ended: answers arriving later are dropped.
        self.ended = False

    def timeout_ms(self) -> int:
        """How long to wait for a heartbeat's answer before treating the connection as dead.

        Two heartbeat intervals (at least 3 s), capped by the request timeout: a heartbeat lost
        in a network black hole is noticed within a session timeout instead of after the 60 s
        socket timeout, so a member cut off and reconnected learns at once that it was fenced.
        """
        floor_ms = max(_MIN_HEARTBEAT_TIMEOUT_MS, 2 * self._interval_ms())
        return min(self._request_timeout_ms, floor_ms)

    def send(self, command: SendHeartbeat) -> bool:
        """Send ``command``'s heartbeat now; False if it cannot go out without a task (nothing
        was sent: the caller sends it with a task)."""
        timeout_ms = self.timeout_ms()
        sent = self._requests.heartbeat_soon(command, timeout_ms, self._answered, self._bug)
        if sent:
            self.in_flight += 1
            self._answer_due_ms = self._clock_ms() + timeout_ms
        return sent

    def answer_comes_by(self, deadline_ms: int) -> bool:
        """Whether an answer (or its timeout), which runs the loop's next turn, is sure to come
        no later than ``deadline_ms``: then the loop needs no timer for that deadline.

        The last heartbeat sent is answered, fails or times out by its due time, and an earlier
        one still in flight by its own, earlier due time.
        """
        return self.in_flight > 0 and self._answer_due_ms <= deadline_ms

    async def wait_drained(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until every heartbeat sent is answered or failed."""
        if not self.in_flight:
            return
        self._drained = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drained, max(0.0, timeout_s))

    def _answered(self, answer: HeartbeatAnswer) -> None:
        """A heartbeat is answered (or failed): feed it and run the loop's next turn right here
        (it schedules the one after)."""
        self.in_flight -= 1
        if self.ended:
            return
        drained = self._drained
        if drained is not None and not self.in_flight and not drained.done():
            drained.set_result(None)
        try:
            self._feed(answer)
        except Exception as exc:  # noqa: BLE001 - a runtime bug: stop the loop and surface it
            self._fail(exc)
            return
        self._after_answer()

    def _bug(self, exc: Exception) -> None:
        """Handling an answer raised before it was fed: a runtime bug."""
        self.in_flight -= 1
        self._fail(exc)
