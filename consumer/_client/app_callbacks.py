"""The application's callbacks as the application-thread server holds them, and the records
of work waiting on that thread: a user commit waiting for its result, and a rebalance callback
whose awaitable ``consumer.aio`` runs (see :mod:`consumer._client.app_thread`)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.member_events import MemberEventSwitch, MemberListener
from consumer._logging import AnyLogger
from consumer.member import ReportCommitResult, TopicPartition

__all__ = [
    "CallbackFinish",
    "Callbacks",
    "CommitCallback",
    "CommitWaiter",
    "ParkedCallback",
    "RebalanceCallback",
]

RebalanceCallback = Callable[[Any, list[KafkaTopicPartition]], None]
#: Completes a rebalance callback's event once the callback has run (its error text, if any).
CallbackFinish = Callable[[str | None], None]
CommitCallback = Callable[[KafkaError | None, list[KafkaTopicPartition]], None]


@dataclass
class Callbacks:
    """The application's rebalance callbacks (``subscribe``) and config callbacks."""

    on_assign: RebalanceCallback | None = None
    on_revoke: RebalanceCallback | None = None
    on_lost: RebalanceCallback | None = None
    error_cb: Callable[..., object] | None = None
    on_state_change: Callable[..., object] | None = None
    logger: AnyLogger | None = None  # the ``logger`` key, for errors nobody else receives
    #: ``Consumer.add_member_listener`` listeners, called in registration order.
    member_listeners: list[MemberListener] = field(default_factory=list)
    #: On while ``member_listeners`` is not empty: the background loop reads it.
    member_events: MemberEventSwitch = field(default_factory=MemberEventSwitch)

    def add_listener(self, listener: MemberListener) -> None:
        """Add a member listener (see ``Consumer.add_member_listener``)."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {type(listener).__name__}")
        self.member_listeners.append(listener)
        self.member_events.on = True

    def remove_listener(self, listener: MemberListener) -> None:
        """Remove a member listener; ``ValueError`` if it was not added."""
        if listener not in self.member_listeners:
            raise ValueError("remove_member_listener(): that listener was not added")
        self.member_listeners.remove(listener)
        self.member_events.on = bool(self.member_listeners)


@dataclass
class CommitWaiter:
    """A user commit waiting for its result."""

    offsets: Mapping[TopicPartition, int]
    on_result: Callable[[ReportCommitResult], None]
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class ParkedCallback:
    """A rebalance callback that returned an awaitable (an ``async def`` callback of
    ``consumer.aio``): serving stops until
    :meth:`~consumer._client.app_thread.AppThreadServer.finish_parked` is called."""

    awaitable: Awaitable[object]
    finish: CallbackFinish
