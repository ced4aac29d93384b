"""``kgm group watch`` against the real broker: it sees a member join and another join and leave.

The watch runs as ``kgm`` does (``python -m consumer.cli`` in a child process, ``--output json``,
``--record FILE``, bounded by ``--duration``), started before the group exists. The test reads
its JSON lines as they come, drives two ``consumer.Consumer`` members, and ends the watch with
Ctrl-C (SIGINT), which must exit 0. The recorded file must be a timeline the testing kit reads and
plots: each member's ownership and coordinator states, the second member ending UNSUBSCRIBED.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from callback_timeline import all_partitions, wait_for_balanced
from consumer_support import CONVERGENCE_S
from member_thread import Group, MemberThread

from consumer import Consumer
from consumer.testing import Timeline, plot
from consumer.testing.timeline_events import Ownership, StateChange

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 2
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The watch's own bound: far beyond what the test needs, so only a hang reaches it.
WATCH_DURATION_MS = 120_000


class WatchProcess:
    """``kgm group watch GROUP --output json`` in a child process, its lines read on a thread."""

    def __init__(self, bootstrap: str, group_id: str, record: Path) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "consumer.cli",
                "group",
                "watch",
                group_id,
                "--bootstrap-server",
                bootstrap,
                "--interval",
                "200",
                "--output",
                "json",
                "--record",
                str(record),
                "--duration",
                str(WATCH_DURATION_MS),
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def wait_for(self, what: str, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first line (from now on) with a change that ``matches``."""
        return self.wait_for_line(what, lambda line: any(matches(c) for c in line["changes"]))

    def wait_for_line(self, what: str, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first line (from now on) that ``matches``."""
        deadline = time.monotonic() + CONVERGENCE_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                self.kill()
                raise AssertionError(
                    f"the watch never showed {what} (exit code {self.process.returncode}); "
                    f"it printed {self.seen}; stderr: {self.stderr()}"
                )
            try:
                line = self.lines.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            self.seen.append(line)
            if matches(line):
                return line

    def wait_until_latest(
        self, what: str, holds: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """The latest line printed, once it ``holds`` (the watch prints only on change, so
        the latest line is the group as the watch last saw it)."""
        deadline = time.monotonic() + CONVERGENCE_S
        while True:
            while not self.lines.empty():
                self.seen.append(self.lines.get_nowait())
            if self.seen and holds(self.seen[-1]):
                return self.seen[-1]
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.kill()
                raise AssertionError(f"the watch never showed {what}; it printed {self.seen}")
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.lines.get(timeout=1.0))

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C; the exit code and stderr."""
        self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=30)
        return self.process.returncode, err

    def stderr(self) -> str:
        """What the watch wrote to stderr (once it has ended)."""
        assert self.process.stderr is not None
        return self.process.stderr.read() if self.process.poll() is not None else ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def _change(kind: str, member: str) -> Callable[[dict[str, Any]], bool]:
    return lambda change: change["change"] == kind and change.get("member") == member


def test_watch_sees_members_join_and_leave_and_records_a_timeline(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    group_id = unique_name("watched")
    record = tmp_path / "watch.jsonl"
    watch = WatchProcess(kafka_bootstrap, group_id, record)
    group = Group()
    try:
        first = watch.wait_for("the group's absence", lambda c: c["change"] == "group_absent")
        assert first["description"] is None

        config = {"bootstrap.servers": kafka_bootstrap, "group.id": group_id}
        a = group.add(MemberThread("a", Consumer(config), [topic], group.timeline))
        a_id = a.consumer.memberid()
        joined = watch.wait_for("a joining", _change("member_joined", a_id))
        assert joined["description"]["type"] == "consumer"
        everything = [{"topic": topic, "partition": p} for p in range(PARTITIONS)]

        def a_owns_everything(line: dict[str, Any]) -> bool:
            members = (line["description"] or {}).get("members") or []
            return any(m["member_id"] == a_id and m["assignment"] == everything for m in members)

        watch.wait_until_latest("a owning every partition", a_owns_everything)
        b = group.add(MemberThread("b", Consumer(config), [topic], group.timeline))
        b_id = b.consumer.memberid()
        watch.wait_for("b joining", _change("member_joined", b_id))
        wait_for_balanced(group.timeline, ["a", "b"], all_partitions(topic, PARTITIONS))

        def both_stable(line: dict[str, Any]) -> bool:
            members = (line["description"] or {}).get("members") or []
            return len(members) == 2 and all(
                m["assignment"] and m["assignment"] == m["target_assignment"] for m in members
            )

        # The watch must have seen b settled (owning its target) before b leaves.
        watch.wait_until_latest("a and b each owning their target", both_stable)
        b.stop()
        left = watch.wait_for("b leaving", _change("member_left", b_id))
        assert [m["member_id"] for m in left["description"]["members"]] == [a_id]

        watch.wait_until_latest("a owning every partition again", a_owns_everything)

        code, err = watch.interrupt()
        assert code == 0, err
    finally:
        watch.kill()
        for member in group.members.values():
            if member.alive:
                member.stop()

    timeline = Timeline()
    assert timeline.merge_jsonl(record) > 0
    events = timeline.events()
    states = {(e.member, e.state) for e in events if isinstance(e, StateChange)}
    assert {(a_id, "STABLE"), (b_id, "STABLE"), (b_id, "UNSUBSCRIBED")} <= states
    b_owned = [e for e in events if isinstance(e, Ownership) and e.member == b_id]
    assert b_owned, "b's partitions were never seen in its assignment"
    assert all(e.owned_to_ms is not None for e in b_owned), "b left, so its ownership ended"
    a_open = sorted(e.partition for e in events if isinstance(e, Ownership) and e.member == a_id
                    and e.owned_to_ms is None)  # fmt: skip
    assert a_open == list(range(PARTITIONS)), "a owns everything again at the end"
    picture = plot(timeline, tmp_path / "watch.png")
    assert picture.stat().st_size > 0
