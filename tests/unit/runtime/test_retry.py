"""Retry policies: bounded attempts, only the listed errors retried."""

from __future__ import annotations

import logging

import pytest

from consumer._runtime.retry import (
    CONNECT_RETRY,
    LOOKUP_RETRY,
    RetryPolicy,
    call_with_retry,
    reconnect_policy,
)
from consumer.errors import (
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    ProtocolError,
    error_for_code,
)

FAST = {"initial_backoff_ms": 1, "max_backoff_ms": 2}


class Flaky:
    """Fails with the given errors in turn, then returns the attempt count."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.attempts = 0

    async def __call__(self) -> int:
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.attempts


@pytest.mark.asyncio
async def test_retries_listed_errors_until_success() -> None:
    operation = Flaky(KafkaConnectionError("a"), KafkaConnectionError("b"))
    assert await call_with_retry(operation, RetryPolicy(max_attempts=3, **FAST)) == 3


@pytest.mark.asyncio
async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    operation = Flaky(*(KafkaConnectionError(str(n)) for n in range(5)))
    with pytest.raises(KafkaConnectionError, match="^2$"):
        await call_with_retry(operation, RetryPolicy(max_attempts=3, **FAST))
    assert operation.attempts == 3


@pytest.mark.asyncio
async def test_other_errors_are_not_retried() -> None:
    operation = Flaky(ProtocolError("not kafka"))
    with pytest.raises(ProtocolError):
        await call_with_retry(operation, RetryPolicy(max_attempts=5, **FAST))
    assert operation.attempts == 1


@pytest.mark.asyncio
async def test_lookup_policy_retries_retriable_broker_errors_only() -> None:
    fast_lookup = RetryPolicy(
        max_attempts=LOOKUP_RETRY.max_attempts, retry_on=LOOKUP_RETRY.retry_on, **FAST
    )
    operation = Flaky(CoordinatorNotAvailableError())
    assert await call_with_retry(operation, fast_lookup) == 2
    fatal = Flaky(error_for_code(30))  # GROUP_AUTHORIZATION_FAILED
    with pytest.raises(type(error_for_code(30))):
        await call_with_retry(fatal, fast_lookup)
    assert fatal.attempts == 1


def test_policy_validates_its_bounds() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(initial_backoff_ms=-1)


def test_reconnect_policy_takes_the_consumers_backoff_and_keeps_the_bounds() -> None:
    policy = reconnect_policy(7, 70)
    assert (policy.initial_backoff_ms, policy.max_backoff_ms) == (7, 70)
    assert (policy.max_attempts, policy.max_elapsed_ms, policy.retry_on) == (
        CONNECT_RETRY.max_attempts,
        CONNECT_RETRY.max_elapsed_ms,
        CONNECT_RETRY.retry_on,
    )
    assert reconnect_policy(CONNECT_RETRY.initial_backoff_ms, CONNECT_RETRY.max_backoff_ms) == (
        CONNECT_RETRY
    )


@pytest.mark.asyncio
async def test_reconnect_policy_waits_within_its_backoff(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="consumer._runtime.retry")
    operation = Flaky(*(KafkaConnectionError(str(n)) for n in range(3)))
    assert await call_with_retry(operation, reconnect_policy(1, 2)) == 4
    waits = [float(r.getMessage().split("retrying in ")[1].split()[0]) for r in caplog.records]
    assert len(waits) == 3
    assert all(0 <= wait <= 0.002 for wait in waits)
