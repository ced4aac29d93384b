"""How ``kgm demo`` narrates: its lines in time order, and the coordinator's view of the group.

:class:`Narrator` prints timed lines from several threads in the order of the times they carry;
:class:`CoordinatorView` reads the group with ConsumerGroupDescribe (as ``kgm group watch``
does) and says, per member, its epoch, what the coordinator believes it owns and its target.
"""

from __future__ import annotations

import asyncio
import heapq
import sys
import threading
from collections.abc import Iterable
from typing import Final

from consumer._bridge.member_events import wall_clock_ms
from consumer._group_admin.fetch import GroupAdmin, GroupNotFoundError
from consumer._group_admin.model import AssignedPartition, GroupDescription
from consumer.errors import ConsumerError

#: How often the coordinator's view is read (ConsumerGroupDescribe and friends).
COORDINATOR_REFRESH_S: Final = 0.25
#: How many characters of a member id are shown (ids are 22 characters of base64).
SHORT_ID_CHARS: Final = 8
#: How long a line is held so that lines from several threads print in time order.
ORDERING_DELAY_MS: Final = 400
#: How long the coordinator's view is still read after the members closed (to see them leave).
LEAVE_WATCH_S: Final = 3.0
#: Refreshes in a row that must fail before the demo says so (a fresh broker's coordinator
#: answers COORDINATOR_LOAD_IN_PROGRESS for a moment; that is not worth a line).
REPORTED_FAILURES: Final = 8

LEGEND: Final = (
    "legend: seconds since start | who: a member (its id, shortened) or the coordinator | "
    "what happened (why) | e=member epoch | owns=partitions held | "
    "target=partitions the coordinator assigned"
)


def partitions_text(partitions: Iterable[int]) -> str:
    """``[0,1,2]`` from partition numbers."""
    return "[" + ",".join(str(p) for p in sorted(partitions)) + "]"


class Narrator:
    """Prints the demo's lines in time order, timed from the start of the run.

    Members' events reach their listeners on the thread that polls, a moment after they
    happened, and the coordinator's view comes from another thread: each line is held for
    :data:`ORDERING_DELAY_MS` and lines are printed by the time they carry, not by arrival.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[int, int, str]] = []  # a heap of (at_ms, arrival, line)
        self._arrivals = 0
        self._stop = threading.Event()
        self._printer: threading.Thread | None = None
        self.t0_ms = wall_clock_ms()

    def start(self) -> None:
        """Start timing from now and printing held lines in the background."""
        self.t0_ms = wall_clock_ms()
        self._printer = threading.Thread(target=self._print_loop, name="demo-narrator")
        self._printer.start()

    def stop(self) -> None:
        """Print every held line and stop the background printing."""
        self._stop.set()
        if self._printer is not None:
            self._printer.join(10)
        self._flush(until_ms=None)

    def say(self, who: str, what: str, at_ms: int | None = None) -> None:
        """One line: seconds since the start, who (padded), what."""
        at = wall_clock_ms() if at_ms is None else at_ms
        line = f"{(at - self.t0_ms) / 1000:6.2f}s  {who:<21} {what}"
        with self._lock:
            self._arrivals += 1
            heapq.heappush(self._pending, (at, self._arrivals, line))

    def note(self, text: str) -> None:
        """A line without a time (progress, summaries), after every line held so far."""
        self._flush(until_ms=None)
        print(text, flush=True)

    def _print_loop(self) -> None:
        while not self._stop.wait(ORDERING_DELAY_MS / 4000):
            self._flush(until_ms=wall_clock_ms() - ORDERING_DELAY_MS)

    def _flush(self, until_ms: int | None) -> None:
        with self._lock:
            while self._pending and (until_ms is None or self._pending[0][0] <= until_ms):
                print(heapq.heappop(self._pending)[2], flush=True)


class CoordinatorView:
    """Reads the group as its coordinator sees it, on its own thread, and prints what changed
    for each member: epoch, assignment (what the coordinator believes it owns) and target."""

    def __init__(self, address: str, group_id: str, narrator: Narrator) -> None:
        self._address, self._group_id, self._narrator = address, group_id, narrator
        self._stop = threading.Event()
        #: member id -> (who, epoch, owns, target) as last printed.
        self._seen: dict[str, tuple[str, int | None, str, str]] = {}
        self._group_epoch: int | None = None
        self._failures = 0
        self._leaving = False
        self._left = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-coordinator", daemon=True)

    def start(self) -> None:
        """Start reading the group on a thread of its own."""
        self._thread.start()

    def stop(self) -> None:
        """Stop reading, once the members are seen to have left (or after a few seconds)."""
        self._left.wait(LEAVE_WATCH_S)
        self._stop.set()
        self._thread.join(10)

    def expect_leaving(self) -> None:
        """The members are closing: from now on, an empty group ends the watch early."""
        self._leaving = True

    def _run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        async with GroupAdmin(
            self._address,
            admin_config={},
            security=None,
            client_id="kgm-demo-coordinator-view",
            timeout_ms=5_000,
        ) as admin:
            while not self._stop.is_set():
                at_ms = wall_clock_ms()
                try:
                    self.show(await admin.describe_group(self._group_id), at_ms)
                    self._failures = 0
                except GroupNotFoundError:
                    pass  # not created yet: the first member's heartbeat creates it
                except (ConsumerError, TimeoutError) as error:
                    self._failures += 1
                    if self._failures == REPORTED_FAILURES:
                        print(
                            f"kgm demo: reading the coordinator's view keeps failing: "
                            f"{type(error).__name__}: {error}",
                            file=sys.stderr,
                            flush=True,
                        )
                if self._leaving and not self._seen:
                    self._left.set()
                await asyncio.sleep(COORDINATOR_REFRESH_S)  # the refresh interval itself

    def show(self, description: GroupDescription, at_ms: int) -> None:
        """Print what changed since the last description."""
        say = self._narrator.say
        if description.group_epoch != self._group_epoch:
            self._group_epoch = description.group_epoch
            say("coordinator", f"group epoch {description.group_epoch}", at_ms)
        members = {m.member_id: m for m in description.members or ()}
        for member_id in sorted(self._seen.keys() - members.keys()):
            who = self._seen.pop(member_id)[0]
            say("coordinator", f"{who:<29} left the group", at_ms)
        for member_id, view in sorted(members.items(), key=lambda item: item[1].client_id):
            who = f"{view.client_id} ({short_id(member_id)})"
            seen = (
                who,
                view.member_epoch,
                _numbers(view.assignment),
                _numbers(view.target_assignment),
            )
            if self._seen.get(member_id) == seen:
                continue
            self._seen[member_id] = seen
            _, epoch, owns, target = seen
            state = "reconciling" if owns != target else "in step"
            say(
                "coordinator",
                f"{who:<29} {state:<11} e={epoch!s:<3} owns={owns} target={target}",
                at_ms,
            )


def short_id(member_id: str) -> str:
    """The first characters of a member id: enough to tell the members apart."""
    return member_id[:SHORT_ID_CHARS]


def _numbers(partitions: tuple[AssignedPartition, ...] | None) -> str:
    return "-" if partitions is None else partitions_text(p.partition for p in partitions)
