"""The data plane's librdkafka handle carries the group.id and looks the group coordinator up
itself; while a group member runs, its non-fatal copy of GROUP_AUTHORIZATION_FAILED must not reach
``poll()`` ahead of the member's own fatal error. Other data-plane events pass, and without a
member (manual assignment) the data plane's event is the only report, so it passes too."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer, Callbacks


class _Event:
    def __init__(self, code: int) -> None:
        self._error = KafkaError(code)

    def error(self) -> KafkaError:
        return self._error


def _server() -> AppThreadServer:
    return AppThreadServer(
        consumer=object(),
        dataplane=object(),  # type: ignore[arg-type]
        to_background=ToBackground[AppEvent](),
        to_application=ToApplication[ToAppEvent](),
        callbacks=Callbacks(),
        auto_offset_reset="earliest",
        consumed_offsets=lambda partitions: {},
    )


def _queued(server: AppThreadServer, *events: Any) -> list[int]:
    for event in events:
        server.add_error_event(event)
    return [event.error().code() for event in server.take_error_events(10)]


def test_the_data_planes_group_authorization_error_is_dropped_while_a_member_runs() -> None:
    server = _server()
    server.subscribed = True
    auth = _Event(KafkaError.GROUP_AUTHORIZATION_FAILED)
    other = _Event(KafkaError._TRANSPORT)
    assert _queued(server, auth, other) == [KafkaError._TRANSPORT]


def test_without_a_member_the_data_planes_group_error_is_returned() -> None:
    server = _server()
    auth = _Event(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert _queued(server, auth) == [KafkaError.GROUP_AUTHORIZATION_FAILED]
