"""``consumer.Consumer``: a drop-in replacement for ``confluent_kafka.Consumer``.

Same constructor config dict, method names, arguments and callback signatures. The group side
(heartbeats, reconciliation, commits with the member epoch) is our KIP-848 member running on a
background thread; records come straight from librdkafka in assign mode and never pass through
a Python queue.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from confluent_kafka import OFFSET_STORED, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.handle import RuntimeHandle
from consumer._bridge.member_events import MemberListener
from consumer._bridge.messages import AppEvent, SetSaslCredentials, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._bridge.quiet import QuietWindow
from consumer._client.app_thread import AppThreadServer, Callbacks, RebalanceCallback
from consumer._client.closing import (
    close_budget_s,
    close_option,
    serve_until_closed,
    stop_timeout_s,
)
from consumer._client.dataplane import DataPlane
from consumer._client.dataplane_methods import DataPlaneMethods
from consumer._client.error_events import poll_overrun_of
from consumer._client.errors import CallbackMisuseError, ConsumerClosedError
from consumer._client.group_metadata import consumer_group_metadata
from consumer._client.manual import ManualAssignment
from consumer._client.metrics import member_metrics, with_member_stats
from consumer._client.offsets import OffsetBook
from consumer._client.polling import POLL_SLICE_S, PollReporter, PollSlices
from consumer._client.records import RecordMethods
from consumer._client.settings import (
    check_callbacks,
    cluster_settings,
    member_config,
    subscription_event,
    with_sasl_user,
)
from consumer._runtime import BackgroundRuntime
from consumer.config import ConsumerConfig, log_ignored_classic_keys, parse_config, wants_classic
from consumer.member import (
    CloseOption,
    CloseRequested,
    MemberState,
    Unsubscribed,
)


class Consumer(RecordMethods, DataPlaneMethods):
    """A Kafka consumer-group member with the API of ``confluent_kafka.Consumer``.

    ``Consumer(config)`` takes librdkafka's configuration keys (see
    ``docs/reference/configuration.md``); ``group.protocol`` is ``consumer`` (KIP-848, the
    default) or ``classic`` (librdkafka's, see ``docs/howto/switching-protocol.md``).
    """

    def __new__(cls, config: dict[str, Any] | None = None, /, **kwargs: Any) -> Consumer:
        if wants_classic({**(config or {}), **kwargs}):  # librdkafka's classic consumer
            from consumer._client.classic import classic_class  # which subclasses this one

            return super().__new__(classic_class(cls))
        return super().__new__(cls)

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._config: ConsumerConfig = parse_config({**(config or {}), **kwargs})
        log_ignored_classic_keys(self._config)
        self._to_background: ToBackground[AppEvent] = ToBackground()
        self._quiet = QuietWindow()
        self._to_background.add_listener(self._quiet.end)
        self._to_application: ToApplication[ToAppEvent] = ToApplication()
        self._dataplane = DataPlane(with_member_stats(dict(self._config.data_plane), self.metrics))
        self._runtime: RuntimeHandle | None = None
        self._offsets = OffsetBook(self._config, self._dataplane, self._to_background)
        self._closed = False
        self._polls = PollReporter(self._config, self._to_background)
        self._slices = PollSlices(self._config, self._quiet)
        self._server = AppThreadServer(
            consumer=self,
            dataplane=self._dataplane,
            to_background=self._to_background,
            to_application=self._to_application,
            callbacks=Callbacks(
                error_cb=self._config.error_cb,
                on_state_change=self._config.on_state_change,
                logger=self._config.logger,
            ),
            auto_offset_reset=self._config.auto_offset_reset,
            consumed_offsets=self._offsets.consumed,
            poll_overrun=poll_overrun_of(self._polls.last_poll, self._config.max_poll_interval_ms),
        )
        self._manual = ManualAssignment(
            self._config, self._dataplane, self._server, self._offsets, self._ensure_runtime
        )
        self._init_records()
        self._ever_subscribed = False
        # The member's runtime starts now and looks the coordinator up (and connects to it), as
        # Java's and librdkafka's consumers do once built with a group id: subscribe()'s join
        # heartbeat then goes out at once. Nothing here waits for the network; the member
        # sends no heartbeat before subscribe() (docs/concepts/architecture.md).
        try:
            self._ensure_runtime()
        except BaseException:  # e.g. built on the members' loop thread: release librdkafka
            self._dataplane.close()
            raise

    # --- extras beyond confluent-kafka ----------------------------------------------------------

    @property
    def state(self) -> str:
        """The member state: UNSUBSCRIBED, JOINING, ..., STABLE, FENCED, STALE, FATAL."""
        return MemberState.UNSUBSCRIBED.name if self._runtime is None else self._runtime.state.name

    @property
    def member_epoch(self) -> int:
        """The member epoch the coordinator gave this member (0 before joining)."""
        return 0 if self._runtime is None else self._runtime.member_epoch

    def metrics(self) -> dict[str, float]:
        """The member's rebalance, heartbeat and commit metrics, named as Java names them (extra):
        a new dict per call, keys listed in ``docs/howto/metrics.md``, also in ``stats_cb``'s
        JSON under ``"group_member"``."""
        return member_metrics(self._runtime)

    def add_member_listener(self, listener: MemberListener) -> None:
        """Call ``listener(event)`` (a :class:`consumer.StateTransition` or
        :class:`consumer.RebalanceEvent`) on every state transition and rebalance callback
        (extra), on the thread that calls ``poll()``/``consume()``/``close()``, in the order
        added; one's exception is raised from that call."""
        self._check_open()
        self._server.callbacks.add_listener(listener)

    def remove_member_listener(self, listener: MemberListener) -> None:
        """Stop calling ``listener``; raises ``ValueError`` if it was not added."""
        self._server.callbacks.remove_listener(listener)

    # --- subscription ---------------------------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe to topic names; a name starting with ``^`` is a broker-side RE2J regex."""
        self._check_open()
        self._check_not_in_callback("subscribe")
        event = subscription_event(topics)
        check_callbacks(on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        callbacks = self._server.callbacks
        callbacks.on_assign, callbacks.on_revoke, callbacks.on_lost = on_assign, on_revoke, on_lost
        self._manual.on_subscribe()
        self._ensure_runtime()
        self._ever_subscribed = True
        self._to_background.put(event)

    def unsubscribe(self) -> None:
        """Leave the group (revoking the assignment first); the consumer stays usable."""
        self._check_open()
        self._check_not_in_callback("unsubscribe")
        self._manual.on_unsubscribe()
        if self._runtime is not None:
            self._offsets.report_consumed(self._server.owned)
            self._to_background.put(Unsubscribed())

    # --- offsets --------------------------------------------------------------------------------

    def commit(
        self,
        message: Message | None = None,
        offsets: list[KafkaTopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[KafkaTopicPartition] | None:
        """Commit offsets with the member epoch (those consumed so far when none are given).

        Synchronous commits return the partitions with per-partition errors and raise on a
        request failure; asynchronous results go to ``on_commit(err, partitions)``.
        """
        self._check_open()
        return self._offsets.commit(
            self._server,
            message,
            offsets,
            asynchronous=asynchronous,
            start_runtime=self._ensure_runtime,
            last_poll_report_ms=self._polls.last_report_ms,
        )

    def store_offsets(
        self, message: Message | None = None, offsets: list[KafkaTopicPartition] | None = None
    ) -> None:
        """Store offsets for the next commit (needs ``enable.auto.offset.store=false``)."""
        self._check_open()
        self._offsets.store(message, offsets, self._server.assigned)

    def committed(
        self, partitions: list[KafkaTopicPartition], timeout: float | None = -1
    ) -> list[KafkaTopicPartition]:
        """The committed offsets of ``partitions`` (OffsetFetch with the member epoch)."""
        self._check_open()
        return self._offsets.committed(self._ensure_runtime(), partitions, timeout)

    def position(self, partitions: list[KafkaTopicPartition]) -> list[KafkaTopicPartition]:
        """The offset of the next record to return, per partition (OFFSET_INVALID if unknown)."""
        self._check_open()
        keys = [(tp.topic, tp.partition) for tp in partitions]
        known = self._server.positions(keys)
        return [KafkaTopicPartition(t, p, known.get((t, p), -1001)) for t, p in keys]

    def assignment(self) -> list[KafkaTopicPartition]:
        """The current assignment: partitions the group gave this member, and assigned ones."""
        self._check_open()
        given = self._manual.given_offsets  # as librdkafka: the start offset, else STORED
        return [
            KafkaTopicPartition(tp.topic, tp.partition, given.get(tp, OFFSET_STORED))
            for tp in sorted(self._server.assigned())
        ]

    # --- assignment ---------------------------------------------------------------------------

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Add partitions to the assignment (manual assignment: no group member is created).

        Inside ``on_assign`` it chooses start offsets of the group's partitions (an absolute
        offset, OFFSET_BEGINNING or OFFSET_END), as confluent-kafka applications do.
        """
        if self._in_callback():
            self._server.choose_start_offsets(partitions)
            return
        self._manual.incremental_assign(partitions)

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Replace the assignment (manual assignment); inside ``on_assign``: as incremental."""
        if self._in_callback():
            self.incremental_assign(partitions)
            return
        self._manual.assign(partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Remove partitions from the assignment; inside callbacks: accepted and ignored."""
        if not self._in_callback():
            self._manual.incremental_unassign(partitions)

    def unassign(self) -> None:
        """Remove every partition (manual assignment); inside callbacks: accepted and ignored."""
        if not self._in_callback():
            self._manual.unassign()

    def memberid(self) -> str | None:
        """The member id (client-generated, KIP-1082), or None before subscribing."""
        if self._runtime is None or not self._ever_subscribed:
            return None
        return self._runtime.member_id

    def consumer_group_metadata(self) -> bytes:
        """The group metadata for ``Producer.send_offsets_to_transaction()``: confluent-kafka's
        bytes with this member's id and epoch (see ``docs/howto/exactly-once.md``)."""
        self._check_open()
        return consumer_group_metadata(self._config, self.memberid(), self.member_epoch)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Authenticate connections opened from now on, of both the member and the data plane,
        with ``username``/``password`` (TypeError / ValueError: not strings; not SASL with a
        password); open ones stay as they are."""
        self._check_open()
        self._config = with_sasl_user(self._config, username, password)
        self._dataplane.set_sasl_credentials(username, password)
        if self._runtime is not None:
            self._to_background.put(SetSaslCredentials(username, password))

    # --- close ----------------------------------------------------------------------------------

    def close(
        self,
        *,
        group_membership: CloseOption | str = CloseOption.DEFAULT,
        timeout: float | None = None,
    ) -> None:
        """Commit (with auto-commit), run on_revoke, leave the group, stop every thread.

        The keywords are Java's ``CloseOptions`` (extra, see :mod:`consumer._client.closing`):
        ``group_membership`` is a :class:`consumer.CloseOption`, ``timeout`` is in seconds."""
        if self._closed:
            return
        option = close_option(group_membership)
        budget_s = close_budget_s(timeout, self._config.max_poll_interval_ms)
        self._check_not_in_callback("close")
        self._fast_poll_ok = False
        try:
            self._manual.close()
            runtime = self._runtime
            if runtime is not None and not runtime.finished:
                self._offsets.report_consumed(self._server.owned)
                self._to_background.put(CloseRequested(option))
                left_s = serve_until_closed(
                    self._server, runtime, self._to_application, budget_s, POLL_SLICE_S
                )
                runtime.stop(timeout_s=stop_timeout_s(left_s, timeout))
        finally:
            self._closed = True
            self._dataplane.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- internals ------------------------------------------------------------------------------

    def _ensure_runtime(self) -> RuntimeHandle:
        """The background runtime, started on first use (the one call into consumer._runtime)."""
        runtime = self._runtime
        if runtime is not None:
            if runtime.finished and runtime.failure is not None:
                self._server.raise_pending()
            return runtime
        runtime = BackgroundRuntime(
            member_config(self._config),
            cluster_settings(self._config),
            self._to_background,
            self._to_application,
            last_poll=self._polls.last_poll,
            member_events=self._server.callbacks.member_events,
            quiet=self._quiet,
        )
        runtime.start()
        self._runtime = runtime
        return runtime

    def _enter_poll(self, method: str = "poll") -> None:
        self._check_open()
        self._check_not_in_callback(method)

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    def _seek_waiting(self, partition: KafkaTopicPartition) -> bool:
        return self._server.seek_waiting(partition)

    def _in_callback(self) -> bool:
        """Whether an assignment call comes from a rebalance callback (False: manual)."""
        self._check_open()
        return self._server.in_callback

    def _check_not_in_callback(self, method: str) -> None:
        if self._server.in_callback:
            raise CallbackMisuseError(f"{method}() may not be called from a rebalance callback")
