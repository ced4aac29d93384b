"""Every member runtime of a process runs on one loop thread (no broker needed: the members stay
unsubscribed, so their one request of their own is a coordinator lookup that finds nobody)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumer._bridge.last_poll import LastPoll
from consumer._bridge.messages import AppEvent, RuntimeFailed, SetSaslCredentials, ToAppEvent
from consumer._bridge.queues import ToApplication, ToBackground
from consumer._bridge.settings import ClusterSettings
from consumer._runtime import BackgroundRuntime
from consumer._runtime.shared_loop import THREAD_NAME, LoopThread, acquire_loop
from consumer.member import MemberConfig
from tests.support import wait_until

#: Nothing listens there; the tests never let a request reach it.
_NOWHERE = "127.0.0.1:9"
_WAIT_S = 10.0


class _Member:
    """A runtime with its two queues."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.to_background: ToBackground[AppEvent] = ToBackground()
        self.to_application: ToApplication[ToAppEvent] = ToApplication()
        settings = ClusterSettings(_NOWHERE, "test-client", connect_timeout_ms=1_000, logger=logger)
        self.runtime = BackgroundRuntime(
            MemberConfig(group_id="g"),
            settings,
            self.to_background,
            self.to_application,
            last_poll=LastPoll(),
        )

    @property
    def loop_thread(self) -> LoopThread:
        loop_thread = self.runtime._loop_thread
        assert loop_thread is not None, "started"
        return loop_thread


@pytest.fixture
def members() -> Iterator[list[_Member]]:
    made: list[_Member] = []
    yield made
    for member in made:
        member.runtime.stop(timeout_s=_WAIT_S)


def _started(members: list[_Member], logger: logging.Logger | None = None) -> _Member:
    member = _Member(logger)
    members.append(member)
    member.runtime.start()
    return member


def _on_loop_of(member: _Member) -> asyncio.Task[bool]:
    """A task that waits forever, created on the loop in ``member``'s context."""
    created: list[asyncio.Task[bool]] = []
    ready = threading.Event()

    def create() -> None:
        created.append(asyncio.get_running_loop().create_task(asyncio.Event().wait()))
        ready.set()

    member.loop_thread.loop.call_soon_threadsafe(create, context=member.runtime._context)
    assert ready.wait(_WAIT_S)
    return created[0]


def test_the_members_of_a_process_share_one_thread(members: list[_Member]) -> None:
    first, second = _started(members), _started(members)
    shared = first.loop_thread
    assert second.loop_thread is shared
    assert shared.thread.name == THREAD_NAME
    assert shared.users >= 2
    first.runtime.stop(timeout_s=_WAIT_S)
    assert first.runtime.finished
    assert not second.runtime.finished
    assert shared.thread.is_alive(), "the second member still runs on it"


#: Run in a fresh interpreter: no other test's runtime may hold the loop thread there.
_LAST_MEMBER_ENDS_THE_THREAD = """
from tests.unit.runtime.test_shared_loop import _Member
first, second = _Member(), _Member()
first.runtime.start(); second.runtime.start()
shared = first.loop_thread
first.runtime.stop(timeout_s=10.0)
assert shared.thread.is_alive(), "one member left"
second.runtime.stop(timeout_s=10.0)
shared.thread.join(10.0)
assert not shared.thread.is_alive(), "the last member's end ends the thread"
third = _Member()
third.runtime.start()
assert third.loop_thread is not shared, "a member after that gets a new thread"
assert third.loop_thread.thread.is_alive()
third.runtime.stop(timeout_s=10.0)
third.loop_thread.thread.join(10.0)
assert not third.loop_thread.thread.is_alive()
print("ok")
"""


def test_the_last_members_end_ends_the_thread_and_a_new_member_starts_another() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LAST_MEMBER_ENDS_THE_THREAD],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).parents[3],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_member_that_ends_cancels_the_tasks_it_left_and_no_one_elses(
    members: list[_Member],
) -> None:
    leaving, staying = _started(members), _started(members)
    left_behind = _on_loop_of(leaving)
    kept = _on_loop_of(staying)
    leaving.runtime.stop(timeout_s=_WAIT_S)
    assert leaving.runtime.finished
    assert left_behind.cancelled()
    assert not kept.done(), "another member's task runs on"


def test_a_member_whose_turn_fails_ends_alone(
    members: list[_Member], monkeypatch: pytest.MonkeyPatch
) -> None:
    failing, healthy = _started(members), _started(members)

    def broken_poll(_now_ms: int) -> object:
        raise RuntimeError("a bug in one member")

    monkeypatch.setattr(failing.runtime._member, "poll", broken_poll)
    failing.to_background.put(SetSaslCredentials("u", "p"))  # wakes its loop: a turn
    assert failing.runtime.wait_finished(_WAIT_S)
    assert isinstance(failing.runtime.failure, RuntimeError)
    delivered = iter(failing.to_application.pop, None)
    assert any(isinstance(event, RuntimeFailed) for event in delivered)
    assert not healthy.runtime.finished
    assert healthy.loop_thread.thread.is_alive()
    healthy.runtime.stop(timeout_s=_WAIT_S)
    assert healthy.runtime.finished
    assert healthy.runtime.failure is None


def test_a_turn_woken_by_the_application_logs_to_its_own_members_logger(
    members: list[_Member], caplog: pytest.LogCaptureFixture
) -> None:
    loggers = [logging.getLogger(f"test.shared_loop.member{index}") for index in range(2)]
    started = [_started(members, logger) for logger in loggers]
    caplog.set_level(logging.ERROR)
    for member in started:
        # From this (the application's) thread: no SASL configured, so the turn logs an error.
        member.to_background.put(SetSaslCredentials("user", "secret"))
    for logger in loggers:
        wait_until(
            lambda name=logger.name: any(record.name == name for record in caplog.records),
            _WAIT_S,
            f"a record on {logger.name}",
        )
    named = [record.name for record in caplog.records if "set_sasl_credentials" in record.message]
    assert sorted(named) == sorted(logger.name for logger in loggers)
    assert all("secret" not in record.getMessage() for record in caplog.records)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_a_loop_thread_of_its_own(members: list[_Member]) -> None:
    parent = _started(members)
    parent_thread = parent.loop_thread
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only the forking thread exists here
        ok = False
        try:
            child_thread = acquire_loop()
            ran = threading.Event()
            child_thread.loop.call_soon_threadsafe(ran.set)
            ok = child_thread is not parent_thread and ran.wait(_WAIT_S)
            child_thread.release()
            child_thread.thread.join(_WAIT_S)
            ok = ok and not child_thread.thread.is_alive()
        finally:
            os.write(write_end, b"1" if ok else b"0")
            os._exit(0)
    os.close(write_end)
    try:
        answer = os.read(read_end, 1)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert answer == b"1", "the child ran a loop thread of its own and ended it"
    assert parent_thread.thread.is_alive()


def test_a_consumer_built_on_the_loop_thread_is_refused(members: list[_Member]) -> None:
    """A consumer built on the loop thread (from a logger handler, say) would wait for its own
    thread forever: it gets a clear error instead, and the loop goes on."""
    from consumer import Consumer

    member = _started(members)
    outcome: list[BaseException | None] = []
    done = threading.Event()

    def build() -> None:
        try:
            Consumer({"bootstrap.servers": _NOWHERE, "group.id": "g"}).close()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)
        done.set()

    member.loop_thread.loop.call_soon_threadsafe(build)
    assert done.wait(_WAIT_S), "the loop thread hung building a consumer"
    assert isinstance(outcome[0], RuntimeError)
    assert THREAD_NAME in str(outcome[0])
    assert member.loop_thread.users == 1  # the refused consumer did not take a share of it
    assert member.runtime.running
