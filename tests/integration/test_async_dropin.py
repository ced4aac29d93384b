"""The drop-in behaviour tests, run on ``consumer.aio.AsyncConsumer``.

The tests of ``tests/behaviour/test_consumer_behaviour.py`` (callbacks inside ``poll()``,
records and their fields, offset resets, commits, ``position()``, ``store_offsets()``,
pause/resume, seek, errors) are imported here and run against the session broker with every
consumer an ``AsyncConsumer`` behind a blocking adapter (``async_adapter.py``): the same
assertions as for ``consumer.Consumer``, through ``await poll()`` / ``await consume()`` /
``await commit()`` on an event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.behaviour.backends import RealBackend
from tests.behaviour.test_consumer_behaviour import (  # noqa: F401 - collected here too
    test_a_new_member_of_the_group_starts_at_the_committed_offset,
    test_a_record_without_key_value_or_headers_reads_back_as_none,
    test_a_synchronous_commit_with_nothing_to_commit_raises_no_offset,
    test_an_asynchronous_commit_with_nothing_to_commit_reports_no_offset,
    test_auto_offset_reset_earliest_reads_what_was_there_before,
    test_auto_offset_reset_latest_skips_what_was_there_before,
    test_bad_config_raises_config_error_naming_the_key,
    test_commit_then_committed,
    test_consume_returns_records_in_offset_order,
    test_methods_after_close_raise_runtime_error,
    test_on_assign_runs_inside_poll_with_every_partition,
    test_pause_stops_delivery_and_resume_restarts_it,
    test_position_is_the_next_offset_to_return,
    test_records_arrive_in_offset_order_with_their_fields,
    test_seek_delivers_again_from_the_offset,
    test_store_offsets_are_what_auto_commit_commits,
)
from tests.integration.async_adapter import BlockingAsyncConsumer

pytestmark = pytest.mark.integration


class AsyncBackend(RealBackend):
    """The behaviour tests' real backend, with ``AsyncConsumer`` instead of ``Consumer``."""

    name = "async"

    def __init__(self, bootstrap: str, admin: AdminClient, unique: Callable[[str], str]) -> None:
        super().__init__(bootstrap, admin, unique)
        self._adapters: list[BlockingAsyncConsumer] = []

    def consumer(self, config: dict[str, Any]) -> Any:
        made = BlockingAsyncConsumer({"bootstrap.servers": self._bootstrap, **config})
        self._adapters.append(made)
        return made

    def close(self) -> None:
        super().close()
        for adapter in self._adapters:
            with contextlib.suppress(Exception):  # teardown; the test has already reported
                adapter.dispose()


@pytest.fixture
def backend(
    kafka_bootstrap: str, admin: AdminClient, unique_name: Callable[[str], str]
) -> Iterator[AsyncBackend]:
    made = AsyncBackend(kafka_bootstrap, admin, unique_name)
    try:
        yield made
    finally:
        made.close()
