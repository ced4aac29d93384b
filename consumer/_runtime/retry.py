"""Retry policies (tenacity) for the connection edge: connecting and coordinator lookup.

Only idempotent steps are retried here. Requests that carry member state (heartbeats, commits)
are never retried at this layer: the member's request managers decide.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from consumer._config.spec import spec_default
from consumer._logging import routed_logger
from consumer.errors import KafkaConnectionError, RetriableError

__all__ = [
    "CONNECT_RETRY",
    "LOOKUP_RETRY",
    "NO_RETRY",
    "RetryPolicy",
    "call_with_retry",
    "reconnect_policy",
]

_log = routed_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter.

    An attempt is retried only if it raised one of ``retry_on``, fewer than ``max_attempts``
    attempts were made, and less than ``max_elapsed_ms`` passed since the first one. The wait
    before retry *n* is uniform in ``[0, min(max_backoff_ms, initial_backoff_ms * 2**n)]``. The
    default backoffs are the key table's ``reconnect.backoff.ms`` and ``reconnect.backoff.max.ms``.
    """

    max_attempts: int = 5
    max_elapsed_ms: int = 10_000
    initial_backoff_ms: int = spec_default("reconnect.backoff.ms", int)
    max_backoff_ms: int = spec_default("reconnect.backoff.max.ms", int)
    retry_on: tuple[type[BaseException], ...] = (KafkaConnectionError,)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(self.max_elapsed_ms, self.initial_backoff_ms, self.max_backoff_ms) < 0:
            raise ValueError("durations must not be negative")

    def retrying(self) -> AsyncRetrying:
        """A fresh tenacity controller for one retried operation."""
        return AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts)
            | stop_after_delay(self.max_elapsed_ms / 1000),
            wait=_OwnJitter(
                multiplier=self.initial_backoff_ms / 1000, max=self.max_backoff_ms / 1000
            ),
            retry=retry_if_exception_type(self.retry_on),
            reraise=True,
            before_sleep=_log_retry,
        )


CONNECT_RETRY = RetryPolicy()
"""Connecting to a broker: retry unreachable / refused / closed, up to 5 attempts or 10 s, with
the default reconnect backoff (a consumer uses :func:`reconnect_policy` with its own)."""

LOOKUP_RETRY = RetryPolicy(
    max_attempts=10,
    max_elapsed_ms=15_000,
    max_backoff_ms=2_000,
    retry_on=(KafkaConnectionError, RetriableError),
)
"""Coordinator lookup: also retry retriable broker errors (e.g. COORDINATOR_NOT_AVAILABLE while
the offsets topic is being created on a fresh cluster)."""

NO_RETRY = RetryPolicy(max_attempts=1)
"""A single attempt."""


def reconnect_policy(backoff_ms: int, backoff_max_ms: int) -> RetryPolicy:
    """:data:`CONNECT_RETRY` with a consumer's ``reconnect.backoff.ms`` (the first wait, doubling
    per failed attempt) and ``reconnect.backoff.max.ms`` (the cap), as librdkafka uses them."""
    return dataclasses.replace(
        CONNECT_RETRY, initial_backoff_ms=backoff_ms, max_backoff_ms=backoff_max_ms
    )


#: The jitter's own generator: tenacity's draws from the ``random`` module's global one, whose
#: state is the application's (a background thread drawing from it makes seeded runs, e.g.
#: Hypothesis's, unreproducible).
_JITTER = random.Random()


class _OwnJitter(wait_exponential):
    """``wait_random_exponential`` (full jitter) drawing from :data:`_JITTER`."""

    def __call__(self, retry_state: RetryCallState) -> float:
        return _JITTER.uniform(0.0, super().__call__(retry_state=retry_state))


def _log_retry(state: RetryCallState) -> None:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    wait_s = state.next_action.sleep if state.next_action is not None else 0.0
    _log.debug("attempt %d failed (%s); retrying in %.3f s", state.attempt_number, error, wait_s)


async def call_with_retry(operation: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """Await ``operation()`` until it succeeds or ``policy`` gives up (then its last error)."""
    async for attempt in policy.retrying():
        with attempt:
            return await operation()
    raise AssertionError("tenacity stopped without raising")  # pragma: no cover
