"""The parts of a :class:`consumer.Consumer` that :class:`~consumer.aio.AsyncConsumer` drives.

``AsyncConsumer`` wraps a ``Consumer`` and reuses its machinery (the server that executes the
background's events, the offsets book, the bridge's queues, the member runtime) instead of
copying it. This module is the one place that reaches into the ``Consumer``'s private
attributes, so that a change there shows up here and nowhere else, with one exception:
``AsyncConsumer.poll`` runs ``Consumer.poll``'s fast path inline (``_fast_poll_ok``,
``_fast_polls_left``, ``_take_held``), because a call per record there costs a tenth of the
throughput of a one-record-per-poll loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer._bridge.handle import RuntimeHandle
from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import AppThreadServer
from consumer._client.consumer import Consumer
from consumer._client.offsets import OffsetBook
from consumer._client.polling import PollSlices
from consumer.config import ConsumerConfig

__all__ = ["ConsumerParts"]


@dataclass(frozen=True)
class ConsumerParts:
    """Views of one ``Consumer``'s internals (see the module docstring)."""

    consumer: Consumer
    config: ConsumerConfig
    server: AppThreadServer
    offsets: OffsetBook
    to_application: ToApplication[ToAppEvent]
    to_background: ToBackground[AppEvent]

    @classmethod
    def of(cls, consumer: Consumer) -> ConsumerParts:
        """The parts of ``consumer``."""
        return cls(
            consumer=consumer,
            config=consumer._config,
            server=consumer._server,
            offsets=consumer._offsets,
            to_application=consumer._to_application,
            to_background=consumer._to_background,
        )

    @property
    def runtime(self) -> RuntimeHandle | None:
        """The member's background runtime, once ``subscribe()`` started it."""
        return self.consumer._runtime

    def ensure_runtime(self) -> RuntimeHandle:
        """The background runtime, started if needed."""
        return self.consumer._ensure_runtime()

    @property
    def last_poll_report_ms(self) -> int:
        """When the member was last told the application polls (``monotonic_ms`` time)."""
        return self.consumer._polls.last_report_ms

    @property
    def closed(self) -> bool:
        """True once the ``Consumer`` is closed."""
        return self.consumer._closed

    def slice_s(self) -> float:
        """The longest a poll waits before looking at the data plane again (the short slice:
        records cannot wake the loop, so a long wait would delay them)."""
        runtime = self.consumer._runtime
        return PollSlices.short_slice_s(None if runtime is None else runtime.state)

    def has_assignment(self) -> bool:
        """True while records are fetched for at least one partition."""
        return self.consumer._dataplane.has_assignment
