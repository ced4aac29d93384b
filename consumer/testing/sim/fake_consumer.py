"""``FakeConsumer``: the :class:`consumer.Consumer` API on a :class:`SimCluster`.

Behind it is a real :class:`consumer.member.Member` (the same group brain as the real consumer),
a simulated background runtime and an in-memory data plane. What the real consumer does on its
application thread runs here through the same code (:class:`~consumer._client.app_thread.
AppThreadServer`): callbacks run only inside ``poll()`` / ``consume()`` / ``close()`` on the
caller's thread, with the same arguments, errors and return shapes. Records are real
``confluent_kafka.Message`` objects.

``poll(timeout)`` moves the simulated clock (never the wall clock) until a record or a callback is
ready or ``timeout`` has passed, so ``poll(1.0)`` returns at once. Inside a
:class:`~consumer.testing.sim.GroupSim` the group owns time and ``poll()`` only serves what is
ready at the current instant. A synchronous ``commit()`` and ``close()`` move the clock as long as
they wait (a blocked application thread lets time pass).

Methods of the real consumer that need a real cluster (``list_topics``, ``offsets_for_times``)
raise ``NotImplementedError`` naming the method.
"""

from __future__ import annotations

import dataclasses
import itertools
from types import TracebackType
from typing import Any, cast

from confluent_kafka import OFFSET_STORED, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.member_events import MemberListener
from consumer._bridge.messages import AppEvent, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._client.app_thread import Callbacks, RebalanceCallback
from consumer._client.closing import close_budget_s, close_option
from consumer._client.dataplane import DataPlane
from consumer._client.errors import (
    CallbackMisuseError,
    ConsumerClosedError,
    ConsumerKafkaException,
)
from consumer._client.group_metadata import consumer_group_metadata
from consumer._client.offsets import OffsetBook
from consumer._client.settings import (
    check_callbacks,
    member_config,
    subscription_event,
    with_sasl_user,
)
from consumer.config import ConsumerConfig, parse_config
from consumer.member import (
    AppPolled,
    CloseOption,
    CloseRequested,
    MemberState,
    Unsubscribed,
)
from consumer.member.metrics import MemberMetrics
from consumer.testing.sim.app_side import (
    OwnershipRecorder,
    SimAppServer,
    recorded_callback,
    recorded_on_commit,
)
from consumer.testing.sim.cluster import INFINITE_POLL_LIMIT_MS, SimCluster
from consumer.testing.sim.dataplane import SimDataPlane
from consumer.testing.sim.fake_offsets import FakeOffsetMethods
from consumer.testing.sim.fetch_control import FetchControl
from consumer.testing.sim.manual import SimManualAssignment
from consumer.testing.sim.runtime import SimRuntime

__all__ = ["FakeConsumer"]

_BOOTSTRAP = "simulated:9092"


class FakeConsumer(FakeOffsetMethods, FetchControl):
    """A :class:`consumer.Consumer` on a simulated cluster (see the module docstring).

    Build one with :meth:`SimCluster.consumer`. ``config`` is the real consumer's configuration,
    validated by the same code (``bootstrap.servers`` may be left out).
    """

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        /,
        *,
        cluster: SimCluster,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        settings = {"bootstrap.servers": _BOOTSTRAP, **(config or {}), **kwargs}
        parsed = parse_config(settings)
        self._cluster = cluster
        self.name: str = name or ""
        self.name = cluster.register(self)
        self._config: ConsumerConfig = dataclasses.replace(
            parsed,
            on_commit=recorded_on_commit(
                parsed.on_commit, self.name, self._now_ms, cluster.record_callback
            ),
        )
        self._dataplane = SimDataPlane(cluster.topics)
        self.runtime: SimRuntime | None = None
        self._seed = cluster.rng.getrandbits(64)
        self._closed = False
        self._last_poll_ms = cluster.clock.now_ms
        self._tokens = itertools.count(1)
        self.ownership = OwnershipRecorder(self.name, cluster.timeline, self._now_ms)
        self._to_background: ToBackground[AppEvent] = ToBackground()
        self._to_application: ToApplication[ToAppEvent] = ToApplication()
        dataplane = cast(DataPlane, self._dataplane)  # the same duck-typed calls as librdkafka's
        self._offsets = OffsetBook(self._config, dataplane, self._to_background)
        self._server = SimAppServer(
            consumer=self,
            dataplane=dataplane,
            to_background=self._to_background,
            to_application=self._to_application,
            callbacks=Callbacks(
                error_cb=self._config.error_cb,
                on_state_change=self._config.on_state_change,
                logger=self._config.logger,
            ),
            auto_offset_reset=self._config.auto_offset_reset,
            consumed_offsets=self._offsets.consumed,
            recorder=self.ownership,
            clock_ms=self._now_ms,
            poll_overrun=self._poll_overrun,
        )
        self._manual = SimManualAssignment(
            self._config,
            self._dataplane,
            self._server,
            self._offsets,
            self._ensure_runtime,
            cluster,
        )

    # --- extras beyond confluent-kafka ----------------------------------------------------------

    def add_member_listener(self, listener: MemberListener) -> None:
        """As :meth:`consumer.Consumer.add_member_listener`; events carry simulated time."""
        self._check_open()
        self._server.callbacks.add_listener(listener)

    def remove_member_listener(self, listener: MemberListener) -> None:
        """As :meth:`consumer.Consumer.remove_member_listener`."""
        self._server.callbacks.remove_listener(listener)

    @property
    def state(self) -> str:
        """The member state: UNSUBSCRIBED, JOINING, ..., STABLE, FENCED, STALE, FATAL."""
        return MemberState.UNSUBSCRIBED.name if self.runtime is None else self.runtime.state.name

    @property
    def member_epoch(self) -> int:
        """The member epoch the coordinator gave this member (0 before joining)."""
        return 0 if self.runtime is None else self.runtime.member_epoch

    def metrics(self) -> dict[str, float]:
        """As :meth:`consumer.Consumer.metrics`, counted on simulated time."""
        runtime = self.runtime
        if runtime is None:
            return MemberMetrics(0).snapshot(0, member_epoch=0)
        return runtime.metrics.snapshot(self._now_ms(), runtime.member_epoch)

    @property
    def cluster(self) -> SimCluster:
        """The simulated cluster this consumer belongs to."""
        return self._cluster

    # --- subscription ---------------------------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe to topic names; a name starting with ``^`` is a regex."""
        self._check_open()
        self._check_not_in_callback("subscribe")
        event = subscription_event(topics)
        check_callbacks(on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        callbacks = self._server.callbacks
        record = self._cluster.record_callback
        callbacks.on_assign = recorded_callback(
            on_assign, "on_assign", self.name, self._now_ms, record
        )
        callbacks.on_revoke = recorded_callback(
            on_revoke, "on_revoke", self.name, self._now_ms, record
        )
        callbacks.on_lost = recorded_callback(on_lost, "on_lost", self.name, self._now_ms, record)
        self._manual.on_subscribe()
        self._ensure_runtime()
        self._to_background.put(event)

    def unsubscribe(self) -> None:
        """Leave the group (revoking the assignment first); the consumer stays usable."""
        self._check_open()
        self._check_not_in_callback("unsubscribe")
        self._manual.on_unsubscribe()
        if self.runtime is not None:
            self._offsets.report_consumed(self._server.owned)
            self._to_background.put(Unsubscribed())

    # --- records --------------------------------------------------------------------------------

    def poll(self, timeout: float | None = -1) -> Message | None:
        """Serve rebalance callbacks, then return one record (or error event), or None."""
        messages = self._receive(1, timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Serve rebalance callbacks, then return up to ``num_messages`` records."""
        if not isinstance(num_messages, int) or not 1 <= num_messages <= 1_000_000:
            raise ValueError(f"num_messages must be an int in 1..1000000, got {num_messages!r}")
        return self._receive(num_messages, timeout)

    def _receive(self, count: int, timeout: float | None) -> list[Message]:
        self._enter_poll()
        deadline_ms = self._deadline_ms(timeout)
        while True:
            self._poll_turn()
            messages = self._server.take_error_events(count)  # member errors first
            while len(messages) < count:
                message = self._dataplane.next_message()
                if message is None:
                    break
                messages.append(message)
                if message.error() is None:
                    self._cluster.timeline.processed(
                        self.name,
                        message.topic() or "",
                        message.partition() or 0,
                        message.offset() or 0,
                        self._now_ms(),
                    )
            if messages:
                cluster = self._cluster
                if cluster.poll_advances_clock and cluster.poll_cost_ms:
                    cluster.advance(cluster.poll_cost_ms)
                return messages
            if not self._wait(deadline_ms):
                return []

    def _poll_turn(self) -> None:
        """Serve the background's events, tell the member the application polled, run it."""
        self._server.serve()
        self._manual.poll()
        runtime = self.runtime  # a consumer that only assigns has no member to tell
        if (
            runtime is not None
            and not runtime.finished
            and (self._server.subscribed or runtime.state is not MemberState.UNSUBSCRIBED)
        ):
            now = self._now_ms()
            self._last_poll_ms = now
            consumed = self._offsets.consumed(self._server.owned)
            offsets = consumed if self._config.enable_auto_commit and consumed else None
            self._to_background.put(AppPolled(consumed_offsets=offsets, polled_at_ms=now))
            self._cluster.run_due()
            self._server.serve()

    def _poll_overrun(self) -> tuple[int, int]:
        interval_ms = self._config.max_poll_interval_ms
        return interval_ms, max(0, self._now_ms() - self._last_poll_ms - interval_ms)

    def _deadline_ms(self, timeout: float | None) -> int:
        if timeout is None or timeout < 0:
            return self._now_ms() + INFINITE_POLL_LIMIT_MS
        return self._now_ms() + int(timeout * 1000)

    def _wait(self, deadline_ms: int) -> bool:
        """Move the clock towards ``deadline_ms`` (False: the time is up, or not ours to move)."""
        now = self._now_ms()
        if not self._cluster.poll_advances_clock or now >= deadline_ms:
            return False
        self._cluster.step_towards(deadline_ms)
        return True

    def assignment(self) -> list[KafkaTopicPartition]:
        """The current assignment: partitions the group gave this member, and assigned ones."""
        self._check_open()
        given = self._manual.given_offsets  # as the real one: the start offset, else STORED
        return [
            KafkaTopicPartition(tp.topic, tp.partition, given.get(tp, OFFSET_STORED))
            for tp in sorted(self._server.assigned())
        ]

    # --- fetch control --------------------------------------------------------------------------

    def memberid(self) -> str | None:
        """The member id (client-generated), or None before subscribing."""
        return None if self.runtime is None else self.runtime.member_id

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Checked as :meth:`consumer.Consumer.set_sasl_credentials` checks them; the simulated
        cluster does not authenticate, so nothing else happens."""
        self._check_open()
        self._config = with_sasl_user(self._config, username, password)

    def consumer_group_metadata(self) -> bytes:
        """As :meth:`consumer.Consumer.consumer_group_metadata` (this member's id and epoch)."""
        self._check_open()
        return consumer_group_metadata(self._config, self.memberid(), self.member_epoch)

    # --- close ----------------------------------------------------------------------------------

    def close(
        self,
        *,
        group_membership: CloseOption | str = CloseOption.DEFAULT,
        timeout: float | None = None,
    ) -> None:
        """Commit (with auto-commit), run on_revoke, leave the group; the keywords are those of
        :meth:`consumer.Consumer.close` (``timeout`` in simulated seconds)."""
        if self._closed:
            return
        option = close_option(group_membership)
        budget_ms = round(close_budget_s(timeout, self._config.max_poll_interval_ms) * 1000)
        self._check_not_in_callback("close")
        try:
            self._manual.close()
            runtime = self.runtime
            if runtime is not None and not runtime.finished:
                self._offsets.report_consumed(self._server.owned)
                self._to_background.put(CloseRequested(option))
                deadline_ms = self._now_ms() + budget_ms
                while not self._server.shut_down:
                    try:
                        self._server.serve()
                    except ConsumerKafkaException:
                        if self._server.fatal_error is not None:
                            break
                    if self._server.shut_down or self._now_ms() >= deadline_ms:
                        break
                    self._cluster.run_due()
                    if not self._server.pending():
                        if runtime.finished:
                            break
                        self._cluster.step_towards(deadline_ms)
        finally:
            self._closed = True
            self._dataplane.unassign(list(self._dataplane.assigned))

    def __enter__(self) -> FakeConsumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- simulation controls ----------------------------------------------------------------

    def crash(self) -> None:
        """Die at once, as a killed process: no commit, no callback, no leave heartbeat."""
        if self.runtime is not None:
            self.runtime.crash()
        self._closed = True

    @property
    def closed(self) -> bool:
        """True after ``close()`` or :meth:`crash`."""
        return self._closed

    # --- internals ------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return self._cluster.clock.now_ms

    def _ensure_runtime(self) -> SimRuntime:
        runtime = self.runtime
        if runtime is not None:
            if runtime.finished and runtime.failure is not None:
                self._server.raise_pending()
            return runtime
        group_id = self._config.group_id
        runtime = SimRuntime(
            self.name,
            member_config(self._config),
            self._seed,
            self._cluster.group(group_id),
            lambda: self._cluster.coordinator_id,
            self._now_ms,
            self._to_background,
            self._to_application,
            on_state=self._cluster.state_changed,
            on_committed=self._cluster.committed,
            on_epoch=self._cluster.epoch_changed,
            member_events=self._server.callbacks.member_events,
            start_offset=self._cluster.start_offset,
        )
        self.runtime = runtime
        return runtime

    def _enter_poll(self) -> None:
        self._check_open()
        if self._server.in_callback:
            raise CallbackMisuseError(
                "poll()/consume() may not be called from inside a rebalance callback"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    def _check_not_in_callback(self, method: str) -> None:
        if self._server.in_callback:
            raise CallbackMisuseError(f"{method}() may not be called from a rebalance callback")
