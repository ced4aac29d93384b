"""Which member reports ``poll()`` returns as error events (as confluent-kafka does) and which
keep going to ``error_cb``: ``_client/error_events.py`` and the application-thread server."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer, Callbacks
from consumer._client.error_events import error_event, poll_overrun_of
from consumer.member import ReportError
from consumer.member.effects import error_report

TOPIC_AUTH = KafkaError.TOPIC_AUTHORIZATION_FAILED
POLL_TIMEOUT = ReportError(None, "MAX_POLL_INTERVAL_EXCEEDED", "left the group", fatal=False)


def test_a_heartbeat_topic_authorization_failure_is_an_event_with_librdkafkas_text() -> None:
    event = error_event(error_report(TOPIC_AUTH, None, fatal=False), None)
    assert event is not None
    error = event.error()
    assert error is not None
    assert (error.code(), error.fatal(), error.retriable()) == (TOPIC_AUTH, False, False)
    assert error.str() == "ConsumerGroupHeartbeat failed: Broker: Topic authorization failed"
    assert (event.topic(), event.partition(), event.offset()) == (None, None, None)


def test_a_poll_timeout_is_an_event_naming_the_interval_and_the_overrun() -> None:
    event = error_event(POLL_TIMEOUT, lambda: (2000, 374))
    assert event is not None
    error = event.error()
    assert error is not None
    assert error.code() == KafkaError._MAX_POLL_EXCEEDED
    assert error.str() == "Application maximum poll interval (2000ms) exceeded by 374ms"


@pytest.mark.parametrize(
    "report",
    [
        # The same code from a commit or an offset fetch is another situation: error_cb.
        ReportError(TOPIC_AUTH, "TOPIC_AUTHORIZATION_FAILED", "auto commit failed", fatal=False),
        ReportError(None, "REVOCATION_TIMEOUT", "revocation not completed", fatal=False),
        ReportError(None, "CALLBACK_FAILED", "on_assign failed: boom", fatal=False),
        ReportError(None, "COORDINATOR_UNAVAILABLE", "cannot be reached", fatal=False),
        error_report(KafkaError.GROUP_AUTHORIZATION_FAILED, None, fatal=True),
    ],
    ids=lambda report: report.error_name,
)
def test_other_reports_are_no_events(report: ReportError) -> None:
    assert error_event(report, lambda: (2000, 0)) is None


def test_the_real_overrun_counts_from_the_last_poll_stamp() -> None:
    last_poll = LastPoll()
    last_poll.stamp(monotonic_ms() - 5000)
    interval_ms, overrun_ms = poll_overrun_of(last_poll, 2000)()
    assert interval_ms == 2000
    assert 3000 <= overrun_ms < 4000, overrun_ms
    last_poll.stamp(monotonic_ms())
    assert poll_overrun_of(last_poll, 2000)() == (2000, 0)


def _server(reported: list[KafkaError]) -> tuple[AppThreadServer, ToApplication[ToAppEvent]]:
    to_application: ToApplication[ToAppEvent] = ToApplication()
    server = AppThreadServer(
        consumer=None,
        dataplane=None,  # type: ignore[arg-type]  # no event here touches it
        to_background=ToBackground[AppEvent](),
        to_application=to_application,
        callbacks=Callbacks(error_cb=reported.append),
        auto_offset_reset="earliest",
        consumed_offsets=lambda partitions: {},
        poll_overrun=lambda: (2000, 10),
    )
    return server, to_application


def test_the_server_queues_events_in_order_and_hands_each_out_once() -> None:
    reported: list[KafkaError] = []
    server, to_application = _server(reported)
    to_application.put(error_report(TOPIC_AUTH, None, fatal=False))
    to_application.put(ReportError(None, "CALLBACK_FAILED", "on_assign failed", fatal=False))
    to_application.put(POLL_TIMEOUT)
    server.serve()
    assert [e.code() for e in reported] == [KafkaError._FAIL]  # only the callback failure
    first = server.take_error_events(1)
    rest = server.take_error_events(10)
    codes = [m.error().code() for m in first + rest]  # type: ignore[union-attr]
    assert codes == [TOPIC_AUTH, KafkaError._MAX_POLL_EXCEEDED]
    assert (len(first), server.take_error_events(10)) == (1, [])
