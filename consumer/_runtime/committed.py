"""``Consumer.committed()`` answered by the background loop: OffsetFetch with the member's id
and epoch, retried until the caller's timeout, the outcome set on the request's reply future."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from consumer._bridge.messages import AppEvent, FetchCommitted
from consumer._runtime.group_requests import GroupRequests
from consumer.errors import KafkaConnectionError, error_for_code
from consumer.member import FetchCommittedOffsets, MemberConfig, TopicPartition

__all__ = ["CommittedAnswers", "refuse_committed_requests"]

STALE_MEMBER_EPOCH = 113


class CommittedAnswers:
    """Answers ``committed()`` requests, each in a task of its own (kept until it ends)."""

    def __init__(
        self,
        requests: GroupRequests,
        config: MemberConfig,
        membership: Callable[[], tuple[str, int]],
        clock_ms: Callable[[], int],
    ) -> None:
        self._requests = requests
        self._config = config
        #: The member's published (member id, epoch) now.
        self._membership = membership
        self._clock_ms = clock_ms
        self._tasks: set[asyncio.Task[None]] = set()

    def answer(self, request: FetchCommitted) -> None:
        """Start answering ``request``; its reply future gets the outcome."""

        async def run() -> None:
            try:
                offsets = await self.fetch(request.partitions, request.timeout_s)
            except asyncio.CancelledError:
                _refuse(request)
                raise
            except Exception as exc:  # noqa: BLE001 - handed to the waiting application thread
                _settle(request, error=exc)
            else:
                _settle(request, offsets=offsets)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def fetch(self, partitions: tuple[TopicPartition, ...], timeout_s: float) -> list[int]:
        """Committed offsets of ``partitions`` (-1001 where none).

        Sent with the member's id and epoch; retriable errors and STALE_MEMBER_EPOCH (the epoch
        is moving) are retried until ``timeout_s``. Raises a typed error.
        """
        config = self._config
        deadline_ms = self._clock_ms() + int(timeout_s * 1000)
        backoff_s = config.retry_backoff_ms / 1000
        while True:
            member_id, member_epoch = self._membership()
            answer = await self._requests.fetch_committed(
                FetchCommittedOffsets(
                    request_id=0,
                    group_id=config.group_id,
                    member_id=member_id if member_epoch > 0 else None,
                    member_epoch=member_epoch if member_epoch > 0 else -1,
                    partitions=partitions,
                )
            )
            codes = [answer.error_code, *answer.partition_errors.values()]
            failing = [code for code in codes if code]
            if not failing:
                return [
                    -1001 if answer.offsets.get(tp) is None else int(answer.offsets[tp] or 0)
                    for tp in partitions
                ]
            error = error_for_code(failing[0])
            retry = error.retriable or failing[0] == STALE_MEMBER_EPOCH
            if not retry or self._clock_ms() + backoff_s * 1000 > deadline_ms:
                raise error
            await asyncio.sleep(backoff_s)  # backoff before the retry
            backoff_s = min(config.retry_backoff_max_ms / 1000, backoff_s * 2)


def _settle(
    request: FetchCommitted,
    *,
    offsets: list[int] | None = None,
    error: BaseException | None = None,
) -> None:
    """Complete ``request``'s reply future (unless the application already gave up on it)."""
    reply = request.reply
    if reply.done():
        return
    if error is not None:
        reply.set_exception(error)
    else:
        reply.set_result(offsets or [])


def _refuse(request: FetchCommitted) -> None:
    """Fail a ``committed()`` request the stopping loop will not answer."""
    _settle(request, error=KafkaConnectionError("the consumer's background loop is not running"))


def refuse_committed_requests(events: list[AppEvent]) -> None:
    """Fail the ``committed()`` requests among events left behind by a stopping loop."""
    for event in events:
        if isinstance(event, FetchCommitted):
            _refuse(event)
