"""The share consumer's background thread: an asyncio loop driving the share member core.

The member's commands are carried out here: heartbeats go to the coordinator through the
:class:`~consumer._runtime.cluster.ClusterClient`, ``StopAndFlush`` and ``ApplyShareAssignment``
go to the :class:`~consumer._share_runtime.dataplane.ShareDataPlane`, whose answers are fed back.
The application talks to it only through the two queues of :mod:`consumer._bridge.queues`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import threading
import time
from concurrent.futures import Future

from consumer._bridge.queues import ToApplication, ToBackground
from consumer._bridge.settings import ClusterSettings
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.retry import reconnect_policy
from consumer._share_runtime.dataplane import AckMap, ShareDataPlane
from consumer._share_runtime.events import (
    Acknowledge,
    AcknowledgementsCompleted,
    AppEvent,
    Close,
    Commit,
    CommitResult,
    PartitionFailed,
    RuntimeFailed,
    SetSaslCredentials,
    ToAppEvent,
)
from consumer._share_runtime.metrics import ShareMetrics
from consumer._share_runtime.transport import ClusterShareTransport
from consumer._wire.share_heartbeat import (
    build_share_heartbeat_request,
    parse_share_heartbeat_response,
)
from consumer.errors import BrokerError, ConsumerError, UnsupportedBrokerError, error_for_code
from consumer.member.inputs import CoordinatorChanged, CoordinatorLost, HeartbeatTransportFailed
from consumer.member.partitions import flatten_assignment
from consumer.share import (
    ApplyShareAssignment,
    AppPolled,
    CloseRequested,
    SendShareHeartbeat,
    ShareAssignmentApplied,
    ShareCommand,
    ShareHeartbeatFailed,
    ShareHeartbeatSucceeded,
    ShareInput,
    ShareMember,
    ShareMemberConfig,
    StopAndFlush,
    StoppedAndFlushed,
)
from consumer.share.acknowledgements import TopicIdPartition
from consumer.share.commands import FindCoordinator, ReportError, ShutDown
from consumer.share.fetch_parameters import ShareFetchParameters

__all__ = ["ShareRuntime"]

_log = logging.getLogger(__name__)
UNSUPPORTED_VERSION = 35
#: Bound on the leave and the closing requests once close() was asked for.
_CLOSE_BOUND_S = 30.0


class ShareRuntime:
    """Owns the background thread, its loop, the cluster client, the member and the data plane."""

    def __init__(
        self,
        cluster_settings: ClusterSettings,
        member_config: ShareMemberConfig,
        parameters: ShareFetchParameters,
    ) -> None:
        self._settings = cluster_settings
        self._member = ShareMember(member_config, random.SystemRandom())
        self._parameters = parameters
        self.to_background: ToBackground[AppEvent] = ToBackground()
        self.to_application: ToApplication[ToAppEvent] = ToApplication()
        #: Acknowledgement outcomes for the commit callback (appended here, taken by the app).
        self.outcomes: collections.deque[AcknowledgementsCompleted] = collections.deque()
        #: Whether the brokers serve RENEW (ShareFetch/ShareAcknowledge v2); None: not known yet.
        self.renew_supported: bool | None = None
        self._thread = threading.Thread(
            target=self._thread_main, name="share-consumer", daemon=True
        )
        self._started = time.monotonic()
        #: ``ShareConsumer.metrics()``: fed by this loop, read by the application.
        self.metrics = ShareMetrics(self._now_ms)
        self._shut_down = False
        self._close: Close | None = None
        self.finished = threading.Event()
        self._cluster: ClusterClient
        self._data: ShareDataPlane
        self._transport: ClusterShareTransport

    @property
    def member_id(self) -> str:
        """The member id this consumer uses in heartbeats and share sessions."""
        return self._member.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch the coordinator gave this member (0 before joining)."""
        return self._member.member_epoch

    def start(self) -> None:
        """Start the background thread."""
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait for the thread to end (at most ``timeout_s``)."""
        self._thread.join(timeout_s)

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The latest ``AcquisitionLockTimeoutMs`` from a broker (None before the first)."""
        data = getattr(self, "_data", None)
        return None if data is None else data.acquisition_lock_timeout_ms

    def _now_ms(self) -> int:
        return int((time.monotonic() - self._started) * 1000)

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to the application, never lost
            _log.exception("the background loop of the share consumer died")
            self.to_application.put(RuntimeFailed(exc))
            if self._close is not None and not self._close.reply.done():
                self._close.reply.set_exception(exc)
        finally:
            self.finished.set()

    async def _main(self) -> None:
        wakeup = asyncio.Event()
        self.to_background.attach(asyncio.get_running_loop(), wakeup)
        settings = self._settings
        async with ClusterClient(
            settings.bootstrap_servers,
            client_id=settings.client_id,
            connect_timeout_ms=settings.connect_timeout_ms,
            request_timeout_ms=settings.request_timeout_ms,
            connect_retry=reconnect_policy(
                settings.reconnect_backoff_ms, settings.reconnect_backoff_max_ms
            ),
            security=settings.security,
            # Heartbeats must not queue behind a ShareFetch long poll on the same connection.
            separate_coordinator_connection=True,
        ) as cluster:
            self._cluster = cluster
            self._transport = ClusterShareTransport(
                cluster, self._member.config.group_id, self._member.member_id, self._parameters
            )
            self._data = ShareDataPlane(
                self._transport,
                deliver=self.to_application.put,
                undelivered=lambda: len(self.to_application),
                report=self._report,
                surface=lambda error: self.to_application.put(PartitionFailed(error)),
                retry_backoff_ms=self._member.config.retry_backoff_ms,
            )
            await self._run(wakeup)

    async def _run(self, wakeup: asyncio.Event) -> None:
        closing_deadline: float | None = None
        while not self._shut_down:
            wakeup.clear()
            for event in self.to_background.drain():
                await self._on_event(event)
            if self._close is not None and closing_deadline is None:
                closing_deadline = time.monotonic() + _CLOSE_BOUND_S
            if closing_deadline is not None and time.monotonic() > closing_deadline:
                _log.warning("share consumer close: the leave did not complete in time")
                break
            commands, deadline_ms = self._member.poll(self._now_ms())
            await self._carry_out(commands)
            if self._shut_down:
                break
            wait_ms = 1_000 if deadline_ms is None else max(0, deadline_ms - self._now_ms())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), min(wait_ms, 1_000) / 1000)
        if self._close is not None and not self._close.reply.done():
            self._close.reply.set_result(None)

    async def _on_event(self, event: AppEvent) -> None:
        match event:
            case Acknowledge(acks=acks, polled=polled):
                if acks:
                    self._data.acknowledge(acks)
                if polled:
                    self._data.nudge()
                    await self._feed(AppPolled())
            case Commit(acks=acks, reply=reply):
                self._data.acknowledge(acks)
                asyncio.create_task(self._commit(reply, self._data.take_for_commit()))
            case SetSaslCredentials(username=username, password=password):
                self._set_sasl_credentials(username, password)
            case Close():
                self._close = event
                await self._data.close()
                await self._feed(CloseRequested())
            case AppPolled():
                self._data.nudge()
                await self._feed(event)
            case _:
                await self._feed(event)

    def _set_sasl_credentials(self, username: str, password: str) -> None:
        try:
            self._cluster.set_sasl_user(username, password)
        except ValueError as exc:
            _log.error("set_sasl_credentials: %s", exc)

    def _report(self, outcome: AcknowledgementsCompleted) -> None:
        self.metrics.acknowledged(outcome.offsets, failed=outcome.error is not None)
        self.outcomes.append(outcome)

    async def _commit(self, reply: Future[CommitResult], taken: dict[int, AckMap]) -> None:
        started_ms = self.metrics.now_ms()
        try:
            result = await self._data.commit(taken)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting application
            reply.set_exception(exc)
            return
        self.metrics.commit_completed(started_ms)
        reply.set_result(result)

    async def _feed(self, event: ShareInput) -> None:
        await self._carry_out(self._member.handle(event, self._now_ms()))

    async def _carry_out(self, commands: list[ShareCommand]) -> None:
        pending = list(commands)
        self.metrics.state_is(self._member.state)
        while pending:
            answer = await self._execute(pending.pop(0))
            if answer is not None:
                pending += self._member.handle(answer, self._now_ms())
                self.metrics.state_is(self._member.state)

    async def _execute(self, command: ShareCommand) -> ShareInput | None:
        group_id = self._member.config.group_id
        match command:
            case FindCoordinator():
                try:
                    location = await self._cluster.find_coordinator(group_id, refresh=True)
                except UnsupportedBrokerError as exc:
                    return CoordinatorLost(str(exc), UNSUPPORTED_VERSION)
                except BrokerError as exc:
                    # Refusals (authorization, authentication) carry their code: the member
                    # fails on them; retriable ones are looked up again after a backoff.
                    return CoordinatorLost(str(exc), None if exc.retriable else exc.code)
                except ConsumerError as exc:
                    return CoordinatorLost(str(exc))
                return CoordinatorChanged(location.node_id)
            case SendShareHeartbeat(request_id=request_id):
                return await self._heartbeat(request_id, command)
            case StopAndFlush(request_id=request_id, partitions=partitions):
                self._data.stop(TopicIdPartition(p.topic_id, p.partition) for p in partitions)
                return StoppedAndFlushed(request_id)
            case ApplyShareAssignment(request_id=request_id, assigned=assigned):
                if self._close is None:
                    await self._learn_renew_support()
                    await self._data.assign(
                        TopicIdPartition(p.topic_id, p.partition) for p in assigned
                    )
                    self.metrics.assignment_applied(len(assigned))
                return ShareAssignmentApplied(request_id)
            case ReportError(error_code=code, error_name=name, message=message, fatal=fatal):
                _log.error("share member error %s: %s", name, message)
                if fatal:
                    error = (
                        ConsumerError(f"{name}: {message}")
                        if code is None
                        else error_for_code(code, message)
                    )
                    self.to_application.put(RuntimeFailed(error))
            case ShutDown():
                self._shut_down = True
        return None

    async def _learn_renew_support(self) -> None:
        if self.renew_supported is None:
            try:
                self.renew_supported = await self._transport.renew_supported()
            except ConsumerError as exc:
                _log.debug("could not learn whether the brokers serve RENEW: %s", exc)

    async def _heartbeat(self, request_id: int, command: SendShareHeartbeat) -> ShareInput | None:
        request = command.request
        sent_ms = self.metrics.now_ms()
        self.metrics.heartbeat_sent()
        try:
            response = await self._cluster.coordinator_request(
                request.group_id, build_share_heartbeat_request(request)
            )
            result = parse_share_heartbeat_response(response)
        except ConsumerError as exc:
            return HeartbeatTransportFailed(request_id, str(exc))
        self.metrics.heartbeat_answered(sent_ms)
        if result.error is not None:
            return ShareHeartbeatFailed(request_id, result.error.code, result.error.broker_message)
        assignment = result.assignment
        return ShareHeartbeatSucceeded(
            request_id,
            result.member_epoch,
            result.heartbeat_interval_ms,
            None if assignment is None else flatten_assignment(assignment),
            result.member_id,
        )
