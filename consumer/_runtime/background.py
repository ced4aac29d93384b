"""The background runtime: a member and its network I/O, as one task on the process's loop.

Each turn of the loop drains the application's events into the member, asks the member for due
work (``Member.poll``), executes the commands (network requests become tasks whose answers are
fed back as inputs; everything for the application thread goes to its queue), and then schedules
the next turn at the member's next deadline; a response or a new application event runs it
sooner. A turn is a plain loop callback (:class:`~consumer._runtime.loop_wakeup.LoopWakeup`), and
a heartbeat over an open coordinator connection needs no task either: it is written from the
turn, and its answer, in the socket's read callback, is fed to the member and runs the next turn
there (:mod:`consumer._runtime.heartbeat_path`).

Every member of the process runs on one loop thread (:mod:`consumer._runtime.shared_loop`), each
in a context of its own (its logger, the tasks it owns). The member is touched by that thread
only. The application reads the published ``state``,
``member_epoch`` and ``member_id`` (:class:`~consumer._runtime.publishing.MemberPublisher`).
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable

from consumer._bridge.last_poll import LastPoll, monotonic_ms
from consumer._bridge.member_events import MemberEventSwitch
from consumer._bridge.messages import (
    AppEvent,
    FetchCommitted,
    RuntimeFailed,
    SetSaslCredentials,
    StopLoop,
    ToAppEvent,
)
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._bridge.quiet import QuietWindow
from consumer._bridge.settings import ClusterSettings
from consumer._logging import log_to, routed_logger
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.committed import CommittedAnswers, refuse_committed_requests
from consumer._runtime.group_requests import Answer, GroupRequests
from consumer._runtime.heartbeat_path import TaskFreeHeartbeats
from consumer._runtime.loop_wakeup import LoopWakeup
from consumer._runtime.metrics import MetricsRecorder
from consumer._runtime.publishing import MemberPublisher
from consumer._runtime.retry import reconnect_policy
from consumer._runtime.shared_loop import LoopThread, TaskOwner, acquire_loop, owned_tasks
from consumer.member import (
    JOIN_EPOCH,
    AppPolled,
    CommitOffsets,
    FetchCommittedOffsets,
    FetchMetadata,
    FindCoordinator,
    Input,
    ListStartOffsets,
    Member,
    MemberConfig,
    MemberState,
    SendHeartbeat,
    ShutDown,
)
from consumer.member import Command as MemberCommand
from consumer.member.effects import MemberRule
from consumer.member.states import IN_GROUP_STATES

_log = routed_logger("consumer.runtime")
#: How long a stopping loop waits for requests in flight (e.g. the leave heartbeat).
_DRAIN_TIMEOUT_S = 5.0
#: How stale the poll stamp fed to the member may be (at most; a quarter of max.poll.interval.ms
#: if that is shorter).
_APP_POLL_FEED_INTERVAL_MS = 1_000
#: States in which nothing reaches the application but in a response or at a timer.
_QUIET_STATES = frozenset({MemberState.STABLE, MemberState.UNSUBSCRIBED})


class BackgroundRuntime:
    """Owns a member, its cluster client, and its task on the shared loop."""

    def __init__(
        self,
        member_config: MemberConfig,
        cluster_settings: ClusterSettings,
        to_background: ToBackground[AppEvent],
        to_application: ToApplication[ToAppEvent],
        *,
        last_poll: LastPoll | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        member_events: MemberEventSwitch | None = None,
        quiet: QuietWindow | None = None,
    ) -> None:
        #: Rebalance, heartbeat and commit metrics, fed from the events below (never per record).
        self._metrics = MetricsRecorder(clock_ms, MemberState.UNSUBSCRIBED)
        self._member = Member(member_config, random.Random(), on_transition=self._on_transition)
        #: What the application reads of the member, and the events telling it what moved.
        self._published = MemberPublisher(
            self._member,
            self._metrics,
            to_application,
            member_events if member_events is not None else MemberEventSwitch(),
        )
        self._cluster_settings = cluster_settings
        self._to_background = to_background
        self._to_application = to_application
        self._clock_ms = clock_ms
        self._loop_thread: LoopThread | None = None
        self._owner: TaskOwner | None = None
        self._context = contextvars.copy_context()
        self._started = threading.Event()
        self._finished = threading.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        #: Coordinator lookups among ``_tasks``: a stopping loop does not wait for them.
        self._lookups: set[asyncio.Task[None]] = set()
        self._wakeup: LoopWakeup | None = None
        #: Resolved when the loop's turns end (``StopLoop``, ``ShutDown``, or a failure).
        self._stopped: asyncio.Future[None] | None = None
        self._turning = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self.failure: BaseException | None = None
        #: When the application last called ``poll()`` (``clock_ms`` time), stamped by its
        #: thread on every call; the loop passes newer values to the member before running
        #: its timers, so max.poll.interval.ms counts from the real last call, not from the
        #: last (throttled) report.
        self._last_poll = last_poll if last_poll is not None else LastPoll()
        self._app_polled_fed_ms: int = 0
        self._app_poll_feed_interval_ms = min(
            _APP_POLL_FEED_INTERVAL_MS, member_config.max_poll_interval_ms // 4
        )
        #: Until when nothing can reach the application (see consumer._bridge.quiet).
        self._quiet = quiet if quiet is not None else QuietWindow()

    @property
    def state(self) -> MemberState:
        """The member's state, as last published by the loop (any thread)."""
        return self._published.state

    @property
    def member_id(self) -> str:
        """The member id, as last published by the loop (any thread)."""
        return self._published.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch, as last published by the loop (any thread)."""
        return self._published.member_epoch

    @property
    def running(self) -> bool:
        """True between ``start()`` and the end of the loop."""
        return self._started.is_set() and not self._finished.is_set()

    @property
    def finished(self) -> bool:
        """True once the loop has ended (cleanly or not)."""
        return self._finished.is_set()

    def start(self) -> None:
        """Start the member's task on the process's loop and wait until it accepts events."""
        if self._loop_thread is not None:
            return
        self._loop_thread = shared = acquire_loop()
        context = self._context
        context.run(log_to, self._cluster_settings.logger)  # the member's tasks inherit it
        self._owner = owned_tasks(context)
        shared.loop.call_soon_threadsafe(self._launch, context=context)
        self._started.wait()

    def metrics(self) -> dict[str, float]:
        """The member's rebalance, heartbeat and commit metrics now (any thread)."""
        return self._metrics.snapshot(self.member_epoch)

    def wait_finished(self, timeout_s: float) -> bool:
        """Block until the loop has ended; False on timeout."""
        return self._finished.wait(timeout_s)

    def stop(self, timeout_s: float) -> None:
        """Ask the member's task to stop and wait for it to end (at most ``timeout_s``)."""
        if self._loop_thread is None:
            return
        self._to_background.put(StopLoop())
        self._finished.wait(timeout_s)

    # --- the member's task --------------------------------------------------------------------

    def _launch(self) -> None:
        """On the loop, in the member's context: start its task."""
        asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._main()
        except BaseException as exc:  # noqa: BLE001 - reported to the application, never lost
            self.failure = exc
            _log.exception("the background loop of the consumer died")
            self._to_application.put(RuntimeFailed(exc))
        finally:
            await self._cancel_left()
            self._finished.set()
            self._started.set()
            assert self._loop_thread is not None
            self._loop_thread.release()

    async def _cancel_left(self) -> None:
        """Cancel what the member's tasks left running (``asyncio.run`` did, per thread)."""
        assert self._owner is not None
        left = self._owner.tasks - {asyncio.current_task()}
        for task in left:
            task.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)

    async def _main(self) -> None:
        self._loop = loop = asyncio.get_running_loop()
        self._stopped = loop.create_future()
        wakeup = LoopWakeup(loop, self._turn, self._context)
        self._wakeup = wakeup
        self._to_background.attach(self._loop, wakeup)
        settings = self._cluster_settings
        cluster = ClusterClient(
            settings.bootstrap_servers,
            client_id=settings.client_id,
            connect_timeout_ms=settings.connect_timeout_ms,
            request_timeout_ms=settings.request_timeout_ms,
            connect_retry=reconnect_policy(
                settings.reconnect_backoff_ms, settings.reconnect_backoff_max_ms
            ),
            security=settings.security,
        )
        requests = GroupRequests(
            cluster, self._member_group_id(), request_timeout_ms=settings.request_timeout_ms
        )
        self._requests = requests
        self._heartbeats = TaskFreeHeartbeats(
            requests,
            interval_ms=lambda: self._member.heartbeats.interval_ms,
            request_timeout_ms=settings.request_timeout_ms,
            clock_ms=self._clock_ms,
            feed=self._feed,
            after_answer=self._turn,
            fail=self._fail,
        )
        self._cluster = cluster
        self._committed = CommittedAnswers(
            requests,
            self._member.config,
            lambda: (self.member_id, self.member_epoch),
            self._clock_ms,
        )
        self._started.set()
        try:
            self._turn()  # every later turn is a loop callback (LoopWakeup)
            await self._stopped
        finally:
            wakeup.close()
            drain_until = loop.time() + _DRAIN_TIMEOUT_S
            if waiting := self._tasks - self._lookups:
                # Let requests already on their way finish (the leave heartbeat above all),
                # bounded so a dead coordinator cannot hold close() hostage. A lookup is not
                # waited for: nothing would use its answer (a consumer closed before it ever
                # subscribed must not wait for an unreachable bootstrap server).
                await asyncio.wait(waiting, timeout=_DRAIN_TIMEOUT_S)
            # Sent without a task: wait for their answers too.
            await self._heartbeats.wait_drained(drain_until - loop.time())
            self._heartbeats.ended = True
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await cluster.close()
            refuse_committed_requests(self._to_background.drain())

    def _turn(self) -> None:
        """One turn of the loop (a loop callback): drain the application's events into the
        member, run its due work, and schedule the next turn at its next deadline."""
        stopped = self._stopped
        assert stopped is not None
        if self._turning or stopped.done():
            if self._turning and self._wakeup is not None:
                self._wakeup.set()  # e.g. an answer fed during a turn: run another after it
            return
        self._turning = True
        try:
            self._run_turn()
        except Exception as exc:  # noqa: BLE001 - ends the loop; _thread_main reports it
            stopped.set_exception(exc)
        finally:
            self._turning = False
        if self._stop_requested and not stopped.done():
            stopped.set_result(None)

    def _run_turn(self) -> None:
        wakeup = self._wakeup
        assert wakeup is not None
        wakeup.clear()
        if self._stop_requested:
            return
        events = self._to_background.drain()
        for index, event in enumerate(events):
            if isinstance(event, StopLoop):
                self._stop_requested = True
                refuse_committed_requests(events[index + 1 :])
                return
            if isinstance(event, FetchCommitted):
                self._committed.answer(event)
            elif isinstance(event, SetSaslCredentials):
                _set_sasl_user(self._cluster, event)
            else:
                self._feed(event)
        if self._stop_requested:
            return
        now_ms = self._clock_ms()
        self._feed_app_poll(now_ms)
        commands, deadline_ms = self._member.poll(now_ms)
        self._publish()
        self._execute(commands)
        if self._stop_requested:
            return
        if deadline_ms is None:
            self._promise_quiet(None)
            wakeup.schedule(None)
            return
        left_ms = deadline_ms - self._clock_ms()  # after the commands ran
        self._promise_quiet(left_ms)
        if self._heartbeats.answer_comes_by(deadline_ms):
            # No timer: a heartbeat's answer (or its timeout) runs the next turn in time (an
            # idle member's sending turn: its next deadline is further away than that).
            wakeup.schedule(None)
        else:
            wakeup.schedule(max(0, left_ms) / 1000)

    def _member_group_id(self) -> str:
        return self._member.config.group_id

    # --- feeding and executing ----------------------------------------------------------------

    def _feed(self, event: Input, now_ms: int | None = None) -> None:
        if now_ms is None:
            now_ms = self._clock_ms()
        self._metrics.input_received(event, now_ms)
        commands = self._member.handle(event, now_ms)
        self._publish()  # the state change reaches the application before what it caused
        self._execute(commands)

    def _feed_app_poll(self, now_ms: int) -> None:
        """Tell the member when the application last polled, before its timers run.

        Not on every turn: the member only compares it with ``max.poll.interval.ms``, so a stamp
        at most a quarter of that interval (and at most a second) old is as good, and an idle
        member's turns skip feeding an input each time.
        """
        polled_ms = self._last_poll.polled_ms
        fed_ms = self._app_polled_fed_ms
        if (
            polled_ms > fed_ms
            and now_ms - fed_ms >= self._app_poll_feed_interval_ms
            and self._member.state in IN_GROUP_STATES
        ):
            self._app_polled_fed_ms = polled_ms
            self._feed(AppPolled(polled_at_ms=polled_ms), now_ms)

    def _execute(self, commands: list[MemberCommand]) -> None:
        if commands:
            self._metrics.commands_issued(commands)
        requests = self._requests
        for command in commands:
            match command:
                case SendHeartbeat():
                    if command.is_leave or not self._send_heartbeat_now(command):
                        self._spawn(
                            requests.heartbeat(command, self._heartbeats.timeout_ms()),
                            expect_answer=not command.is_leave,
                        )
                    names = command.request.subscribed_topic_names
                    if command.request.member_epoch == JOIN_EPOCH and names:
                        self._spawn(requests.resolve_names(names))  # ids before the assignment
                case FindCoordinator():
                    self._spawn(requests.find_coordinator(), lookup=True)
                case FetchMetadata():
                    self._spawn(requests.metadata(command))
                case CommitOffsets():
                    self._spawn(requests.commit(command))
                case FetchCommittedOffsets():
                    self._spawn(requests.fetch_committed(command))
                case ListStartOffsets():
                    self._spawn(requests.list_start_offsets(command))
                case ShutDown():
                    self._to_application.put(command)
                    self._stop_requested = True
                case _:
                    self._to_application.put(command)

    def _send_heartbeat_now(self, command: SendHeartbeat) -> bool:
        """Send a heartbeat without a task if it can go out that way (False: a task sends it)."""
        sent = self._heartbeats.send(command)
        if sent:
            self._quiet.end()  # its answer may be for the application (an assignment)
        return sent

    def _promise_quiet(self, left_ms: int | None) -> None:
        """Promise the application thread quiet until the member's next timer, due in
        ``left_ms`` (None: no timer), when nothing else can reach it before then: STABLE (or
        UNSUBSCRIBED: manual assignment's commits only), no request in flight, no event queued
        that asked for an answer."""
        if (
            self._member.state not in _QUIET_STATES
            or self._tasks
            or self._heartbeats.in_flight
            or self._to_background.woken
        ):
            self._quiet.end()
        elif left_ms is None:  # no timer at all
            self._quiet.promise(math.inf)
        else:
            self._quiet.promise(time.monotonic() + left_ms / 1000)

    def _spawn(
        self, request: Awaitable[Answer], expect_answer: bool = True, *, lookup: bool = False
    ) -> None:
        self._quiet.end()  # its answer may be for the application (an assignment, a commit)

        async def run() -> None:
            answer = await request
            if self._stop_requested and not expect_answer:
                return
            self._feed(answer)
            # No longer in flight: the turn this wakes up must see it gone (it runs before the
            # task's done callback) to promise quiet.
            self._tasks.discard(task)
            if self._wakeup is not None:
                self._wakeup.set()

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        if lookup:
            self._lookups.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._lookups.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        """An exception in a request's handling is a bug in the runtime: stop the loop and
        surface it."""
        self.failure = exc
        self._to_application.put(RuntimeFailed(exc))
        self._stop_requested = True
        if self._wakeup is not None:
            self._wakeup.set()

    def _on_transition(self, _previous: MemberState, rule: MemberRule) -> None:
        """The member's observer: called for every rules-table row that fires."""
        self._published.row_fired(self._member, rule)

    def _publish(self) -> None:
        self._published.publish(self._member)


def _set_sasl_user(cluster: ClusterClient, event: SetSaslCredentials) -> None:
    try:
        cluster.set_sasl_user(event.username, event.password)
    except ValueError as exc:  # the facade checks first; a race with close() at most
        _log.error("set_sasl_credentials: %s", exc)
