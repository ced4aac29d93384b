"""In-process group members, each polling on its own thread (integration tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from callback_timeline import Timeline
from confluent_kafka import KafkaError, Message, TopicPartition

from tests.support import wait_until

MessageHandler = Callable[["MemberThread", list[Message]], None]


class MemberThread:
    """One member polling on its own thread: subscribe, ``poll(0.1)`` until stopped, close.

    Callbacks therefore run on this thread, as the API promises. Records go to ``on_messages``
    (default: :meth:`record_consumed`); error events returned by ``poll()`` are kept in
    ``errors``; an exception raised by the consumer stops the thread and is re-raised by
    :meth:`stop`. ``batch_size > 1`` uses ``consume(batch_size, 0.1)`` instead of ``poll``.
    """

    def __init__(
        self,
        name: str,
        consumer: Any,
        topics: list[str],
        timeline: Timeline,
        *,
        on_messages: MessageHandler | None = None,
        on_revoke_extra: Callable[[Any, list[TopicPartition]], None] | None = None,
        batch_size: int = 1,
    ) -> None:
        self.name = name
        self.consumer = consumer
        self.topics = topics
        self.timeline = timeline
        self.on_messages = on_messages or MemberThread.record_consumed
        self.on_revoke_extra = on_revoke_extra
        self.batch_size = batch_size
        self.errors: list[KafkaError] = []
        self.consumed: list[tuple[int, int, bytes | None]] = []  # (partition, offset, value)
        self.polls = 0
        self.closed = threading.Event()
        self.pause_polling = threading.Event()
        self._stop = threading.Event()
        self._close_on_stop = True
        self._failure: BaseException | None = None
        self._subscribed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> MemberThread:
        self._thread.start()
        wait_until(
            lambda: self._subscribed.is_set() or self._failure is not None,
            30,
            f"{self.name} to subscribe",
        )
        self._raise_failure()
        return self

    @staticmethod
    def record_consumed(member: MemberThread, messages: list[Message]) -> None:
        for message in messages:
            member.consumed.append((message.partition(), message.offset(), message.value()))

    def _run(self) -> None:
        try:
            self.consumer.subscribe(
                self.topics, **self.timeline.callbacks(self.name, self.on_revoke_extra)
            )
            self._subscribed.set()
            while not self._stop.is_set():
                if self.pause_polling.is_set():
                    self._stop.wait(0.05)
                    continue
                self._poll_once()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread by stop()
            self._failure = exc
        finally:
            self._subscribed.set()
            if self._close_on_stop:
                try:
                    self.consumer.close()
                except BaseException as exc:  # noqa: BLE001
                    self._failure = self._failure or exc
            self.closed.set()

    def _poll_once(self) -> None:
        if self.batch_size > 1:
            messages = self.consumer.consume(self.batch_size, 0.1)
        else:
            message = self.consumer.poll(0.1)
            messages = [] if message is None else [message]
        self.polls += 1
        records = []
        for message in messages:
            if message.error() is not None:
                self.errors.append(message.error())
            else:
                records.append(message)
        if records:
            self.on_messages(self, records)

    def stop(self, *, close: bool = True, timeout_s: float = 30.0) -> None:
        """Stop polling; ``close()`` on the member's thread unless ``close=False``."""
        self._close_on_stop = close
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.name} did not stop within {timeout_s}s"
        self._raise_failure()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise AssertionError(f"member {self.name} failed: {failure!r}") from failure


@dataclass
class Group:
    """The in-process members of one test, stopped (and closed) together."""

    timeline: Timeline = field(default_factory=Timeline)
    members: dict[str, MemberThread] = field(default_factory=dict)

    def add(self, member: MemberThread) -> MemberThread:
        self.members[member.name] = member
        member.start()
        return member

    def live(self) -> list[str]:
        return [name for name, m in self.members.items() if not m.closed.is_set()]

    def assert_callbacks_on_poll_threads(self) -> None:
        """Every callback of an in-process member ran on the thread that polls it."""
        wrong = [
            f"{e.member} {e.kind} on thread {e.thread!r}"
            for e in self.timeline.events()
            if e.member in self.members and e.thread != f"member-{e.member}"
        ]
        assert not wrong, "callbacks off the polling thread: " + "; ".join(wrong)

    def stop_all(self) -> None:
        failures: list[str] = []
        for member in self.members.values():
            try:  # also reports a member whose thread already ended with a failure
                member.stop()
            except AssertionError as exc:
                failures.append(str(exc))
        assert not failures, "\n".join(failures)
