"""Member errors that ``poll()`` / ``consume()`` return as error events, as confluent-kafka does.

librdkafka (``group.protocol=consumer``) hands two non-fatal group errors to the application as a
``confluent_kafka.Message`` whose ``error()`` is set, not through ``error_cb`` (probed against a
Kafka 4.3.1 broker with confluent-kafka 2.16.1):

* ``TOPIC_AUTHORIZATION_FAILED`` (29) from ConsumerGroupHeartbeat: the member lacks READ on a
  subscribed topic; it stays in the group and the error comes back with later heartbeats
  ("ConsumerGroupHeartbeat failed: Broker: Topic authorization failed").
* ``_MAX_POLL_EXCEEDED`` (-147): the application did not poll within ``max.poll.interval.ms`` and
  the member left the group, "Application maximum poll interval (300000ms) exceeded by 12ms".

Every other non-fatal member report keeps its channel (``error_cb``, else the logger).
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError, Message

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer.member import ReportError

__all__ = ["PollOverrun", "error_event", "poll_overrun_of"]

#: ``max.poll.interval.ms`` and by how many milliseconds the current gap between two polls
#: exceeds it (0 when it does not), read when the report is served.
PollOverrun = Callable[[], tuple[int, int]]

#: The member's name of its poll-timer report (``consumer.member.effects``).
_POLL_TIMEOUT = "MAX_POLL_INTERVAL_EXCEEDED"


def error_event(report: ReportError, poll_overrun: PollOverrun | None) -> Message | None:
    """The error event ``poll()`` returns for ``report``; None for reports sent elsewhere."""
    if report.fatal:
        return None
    if report.heartbeat and report.error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        # librdkafka's text, which names only the code.
        reason = KafkaError(report.error_code).str()
        error = KafkaError(report.error_code, f"ConsumerGroupHeartbeat failed: {reason}")
        return Message(error=error)
    if report.error_code is None and report.error_name == _POLL_TIMEOUT:
        text = "Application maximum poll interval exceeded"
        if poll_overrun is not None:
            interval_ms, overrun_ms = poll_overrun()
            text = f"Application maximum poll interval ({interval_ms}ms) exceeded by {overrun_ms}ms"
        return Message(error=KafkaError(KafkaError._MAX_POLL_EXCEEDED, text))
    return None


def poll_overrun_of(last_poll: LastPoll, max_poll_interval_ms: int) -> PollOverrun:
    """The real consumer's :data:`PollOverrun`: ``poll()`` serves the member's report before
    stamping itself, so the gap runs from the previous ``poll()`` to now."""

    def overrun() -> tuple[int, int]:
        gap_ms = monotonic_ms() - last_poll.polled_ms
        return max_poll_interval_ms, max(0, gap_ms - max_poll_interval_ms)

    return overrun
