"""``Consumer.close()`` options, as Java's ``CloseOptions`` (KIP-1092).

``group_membership`` says whether the closing member leaves the group:

* :attr:`~consumer.member.CloseOption.DEFAULT`: a dynamic member leaves (heartbeat epoch -1,
  its partitions move at once); a static member (``group.instance.id``) leaves temporarily
  (epoch -2): the broker keeps its seat and assignment for the session timeout, so a restart
  with the same instance id gets them back without a rebalance.
* :attr:`~consumer.member.CloseOption.LEAVE_GROUP`: leave for good (epoch -1), static or not.
* :attr:`~consumer.member.CloseOption.REMAIN_IN_GROUP`: send no leave for a dynamic member (the
  broker removes it after the session timeout); epoch -2 for a static member.

``timeout`` (seconds) bounds the whole close: the commit of consumed offsets (with auto-commit),
``on_revoke`` and the leave heartbeat; ``None`` waits up to ``max.poll.interval.ms`` as before.
"""

from __future__ import annotations

import math
import time

from confluent_kafka import KafkaError

from consumer._bridge.handle import RuntimeHandle
from consumer._bridge.messages import ToAppEvent
from consumer._bridge.queues import ToApplication
from consumer._client.app_thread import AppThreadServer
from consumer._client.errors import ConsumerKafkaException, kafka_exception
from consumer.member import CloseOption

__all__ = [
    "STOP_TIMEOUT_S",
    "close_budget_s",
    "close_option",
    "serve_until_closed",
    "stop_timeout_s",
]

#: How long ``close()`` waits for the background loop to stop once the member is done (at most).
STOP_TIMEOUT_S = 10.0
#: The least time the loop gets to send the leave heartbeat, even with ``timeout=0``.
_MIN_STOP_S = 0.5


def close_option(value: CloseOption | str) -> CloseOption:
    """``value`` as a :class:`CloseOption` (also its string value, e.g. ``"leave_group"``)."""
    if isinstance(value, CloseOption):
        return value
    try:
        return CloseOption(value)
    except ValueError:
        allowed = ", ".join(repr(option.value) for option in CloseOption)
        raise kafka_exception(
            KafkaError._INVALID_ARG,
            f"close(group_membership={value!r}): expected a consumer.CloseOption or one of "
            f"{allowed}",
        ) from None


def close_budget_s(timeout: float | None, max_poll_interval_ms: int) -> float:
    """Seconds ``close()`` may wait for the member to finish (``timeout`` checked)."""
    if timeout is None:
        return max_poll_interval_ms / 1000
    if not isinstance(timeout, int | float) or math.isnan(timeout) or timeout < 0:
        raise kafka_exception(
            KafkaError._INVALID_ARG,
            f"close(timeout={timeout!r}): expected seconds >= 0, or None for the default",
        )
    return float(timeout)


def stop_timeout_s(budget_left_s: float, timeout: float | None) -> float:
    """How long to wait for the loop to stop: :data:`STOP_TIMEOUT_S`, or what is left of an
    explicit ``timeout`` (at least long enough to send the leave heartbeat)."""
    if timeout is None:
        return STOP_TIMEOUT_S
    return min(STOP_TIMEOUT_S, max(budget_left_s, _MIN_STOP_S))


def serve_until_closed(
    server: AppThreadServer,
    runtime: RuntimeHandle,
    to_application: ToApplication[ToAppEvent],
    budget_s: float,
    slice_s: float,
) -> float:
    """Serve the member's events (its last commit, ``on_revoke``) on the calling thread until
    it has shut down, the loop has ended or ``budget_s`` ran out; return the seconds left."""
    deadline = time.monotonic() + budget_s
    while not server.shut_down and not runtime.finished:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            server.serve()
        except ConsumerKafkaException:
            if server.fatal_error is not None:
                break
        to_application.wait(min(remaining, slice_s))
    return deadline - time.monotonic()
