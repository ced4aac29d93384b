"""The group under test in the reliability tier: its member processes, the faults injected into
it and the merged record of the run."""

from __future__ import annotations

import contextlib
import datetime
import signal
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from member_processes import MemberProcess
from reliability_support import (
    CONVERGE_S,
    HEARTBEAT_MS,
    LAST_HEARD_SLACK_MS,
    ProducedLog,
)

from consumer.testing.real.proxy import ProxiedBroker
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import (
    FENCE,
    KILL,
    Fault,
    wall_clock_ms,
)
from tests.support import wait_until


class Fleet:
    """Member processes of one run, one slot (proxy) each, plus the run's parent timeline.

    The parent timeline holds what the test did (faults, produced records); the members' own
    files are merged into it by :meth:`timeline`.
    """

    def __init__(
        self,
        cluster: ProxiedBroker,
        workdir: Path,
        topic: str,
        group: str,
        partitions: int,
        **defaults: Any,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.topic = topic
        self.group = group
        self.partitions = partitions
        self.defaults = defaults
        self.members: list[MemberProcess] = []
        self.parent = Timeline()
        self.fault_counts: Counter[str] = Counter()
        self._incarnation: Counter[str] = Counter()

    def spawn(self, slot: str, **behaviour: Any) -> MemberProcess:
        self._incarnation[slot] += 1
        name = f"{slot}.{self._incarnation[slot]}"
        spec = {"topics": [self.topic], **self.defaults, **behaviour}
        spec["config"] = {
            "bootstrap.servers": self.cluster.bootstrap_servers(slot),
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "socket.timeout.ms": 3000,
            **spec.get("config", {}),
        }
        member = MemberProcess(slot, name, self.workdir, spec)
        self.members.append(member)
        return member

    def live(self) -> list[MemberProcess]:
        return [m for m in self.members if m.alive]

    def by_slot(self, slot: str) -> MemberProcess:
        return [m for m in self.members if m.slot == slot and m.alive][-1]

    def all_partitions(self) -> set[tuple[str, int]]:
        return {(self.topic, p) for p in range(self.partitions)}

    # -- waiting -----------------------------------------------------------------------------

    def converged(self, members: Sequence[MemberProcess] | None = None) -> bool:
        """Every given (default: live) member is STABLE, they own every partition once, and the
        assignment is balanced (owned counts differ by at most one, as the broker's uniform
        assignor targets): a newcomer is STABLE with nothing while the previous owner has not
        yet revoked what the broker will move to it, which is not converged."""
        chosen = list(members) if members is not None else self.live()
        if not chosen:
            return False
        views = [m.refresh() for m in chosen]
        if any(v.state != "STABLE" for v in views):
            return False
        owned = [p for v in views for p in v.owned]
        counts = [len(v.owned) for v in views]
        balanced = max(counts) - min(counts) <= 1
        return balanced and len(owned) == len(set(owned)) and set(owned) == self.all_partitions()

    def wait_converged(
        self, timeout_s: float = CONVERGE_S, members: Sequence[MemberProcess] | None = None
    ) -> float:
        return wait_until(
            lambda: self.converged(members),
            timeout_s,
            "the group to be STABLE and balanced with every partition owned once",
            self.describe,
        )

    def processed_keys(self) -> set[tuple[int, int]]:
        keys: set[tuple[int, int]] = set()
        for member in self.members:
            for line in member.refresh().lines:
                if line["type"] == "processed":
                    keys.add((line["partition"], line["offset"]))
        return keys

    def wait_all_processed(self, produced: ProducedLog, timeout_s: float) -> float:
        expected = produced.keys()
        return wait_until(
            lambda: expected <= self.processed_keys(),
            timeout_s,
            f"all {len(expected)} produced records to be processed",
            lambda: f"missing {len(expected - self.processed_keys())}\n" + self.describe(),
        )

    def describe(self) -> str:
        rows = []
        for m in self.members:
            v = m.refresh()
            rows.append(
                f"  {m.name}: alive={m.alive} state={v.state} owned={sorted(v.owned)} "
                f"processed={v.processed}"
            )
            if not m.alive and m.killed_at_ms is None:
                rows.append("    stderr: " + m.stderr()[-800:].replace("\n", "\n    "))
        return "\n".join(rows)

    # -- faults ------------------------------------------------------------------------------

    def fault(self, kind: str, member: str | None, start_ms: int, end_ms: int | None) -> None:
        self.parent.fault(kind, member, start_ms, end_ms)
        self.fault_counts[kind] += 1

    def kill(self, member: MemberProcess) -> None:
        at = member.kill()
        self.fault(KILL, member.name, at, at)

    def pause(
        self,
        member: MemberProcess,
        seconds: float,
        until: Callable[[], object] | None = None,
        max_s: float = 60.0,
    ) -> tuple[int, int]:
        """SIGSTOP ``member`` for ``seconds`` (then, if given, until ``until()`` holds); SIGCONT."""
        start = member.signal(signal.SIGSTOP)
        try:
            self._hold(seconds, until, max_s, f"{member.name} paused")
        finally:
            end = member.signal(signal.SIGCONT)
            self.fault("pause", member.name, start - LAST_HEARD_SLACK_MS, end)
        return start, end

    def blackhole(
        self,
        member: MemberProcess,
        seconds: float,
        until: Callable[[], object] | None = None,
        max_s: float = 60.0,
    ) -> tuple[int, int]:
        """Blackhole ``member``'s proxy for ``seconds`` (then until ``until()`` holds); heal."""
        proxy = self.cluster.proxy(member.slot)
        start = wall_clock_ms()
        proxy.blackhole()
        try:
            self._hold(seconds, until, max_s, f"{member.name} blackholed")
        finally:
            proxy.heal()
            end = wall_clock_ms()
            self.fault("blackhole", member.name, start - LAST_HEARD_SLACK_MS, end)
        return start, end

    def _hold(
        self, seconds: float, until: Callable[[], object] | None, max_s: float, what: str
    ) -> None:
        time.sleep(seconds)  # the fault itself: held this long
        if until is not None:
            wait_until(until, max_s, f"the group to react while {what}", self.describe)

    def stop_all(self) -> None:
        for member in self.members:
            if member.alive:
                with contextlib.suppress(AssertionError):
                    member.leave()
        for member in self.members:
            member.ensure_dead()

    # -- the record of the run ---------------------------------------------------------------

    def broker_fences(self) -> list[tuple[str, int, str]]:
        """``(timeline member, at_ms, reason)`` for every member of this group the broker's group
        coordinator fenced (its INFO log: "Member X fenced from the group because ...")."""
        names: dict[str, str] = {}
        for member in self.members:
            for side in member.view.side_events("member_id"):
                names[side["id"]] = member.name
        fences: list[tuple[str, int, str]] = []
        log = self.cluster.broker.log_path
        if not log.exists():
            return fences
        tag = f"[GroupId {self.group}] Member "
        for line in log.read_text(errors="replace").splitlines():
            if tag not in line or " fenced from the group" not in line:
                continue
            stamp = datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
            member_id = line.split(tag, 1)[1].split(" fenced from the group", 1)[0]
            reason = line.split(" fenced from the group", 1)[1].split(". (", 1)[0].strip()
            if member_id in names:
                fences.append((names[member_id], int(stamp.timestamp() * 1000), reason))
        return fences

    def timeline(self, rebalance_timeout_ms: int | None = None) -> Timeline:
        """The merged timeline: parent events plus every member's file.

        A ``slow_revoke`` longer than ``rebalance_timeout_ms`` becomes a FENCE fault: the broker
        fences the member when its rebalance timer (started when the revocation was sent, at the
        latest when the callback started) runs out, while the callback still runs.
        """
        merged = Timeline()
        for event in self.parent.events():
            merged.record(event)
        for name, at_ms, _reason in self.broker_fences():
            merged.fault(FENCE, name, at_ms, at_ms)
        for member in self.members:
            for line in member.refresh().lines:
                kind = line["type"]
                if kind == "assigned":
                    merged.assigned(line["member"], line["topic"], line["partition"], line["at_ms"])
                elif kind == "revoked":
                    merged.revoked(line["member"], line["topic"], line["partition"], line["at_ms"])
                elif kind == "processed":
                    merged.processed(
                        line["member"],
                        line["topic"],
                        line["partition"],
                        line["offset"],
                        line["at_ms"],
                    )
                elif kind == "commit":
                    merged.commit(
                        line["member"],
                        line["topic"],
                        line["partition"],
                        line["offset"],
                        line["at_ms"],
                    )
                elif kind == "state":
                    merged.state(line["member"], line["state"], line["at_ms"])
                elif (
                    kind == "x"
                    and line["kind"] == "slow_revoke"
                    and rebalance_timeout_ms is not None
                    and line["delay_s"] * 1000 > rebalance_timeout_ms
                ):
                    start = line["at_ms"] + rebalance_timeout_ms - 2 * HEARTBEAT_MS
                    merged.fault(FENCE, line["member"], start, start)
        return merged

    def side_events(self, kind: str) -> list[dict[str, Any]]:
        return [s for m in self.members for s in m.view.side_events(kind)]

    def save_evidence(self, problems: Sequence[str]) -> Path:
        """Write what a failed run needs to be understood next to the members' files: the
        faults the test injected, each member's broker member id, the broker's log lines about
        this group, and every problem the checks found. Returns the report's path."""
        path = self.workdir / f"run-report-{self.group}.txt"
        lines = ["# faults (kind, member, start_ms, end_ms)"]
        for event in self.parent.events():
            if isinstance(event, Fault):
                lines.append(f"{event.kind} {event.member} {event.start_ms} {event.end_ms}")
        lines.append("# member ids")
        for member in self.members:
            for side in member.view.side_events("member_id"):
                lines.append(f"{member.name} {side['id']}")
        lines.append("# broker log lines about the group")
        log = self.cluster.broker.log_path
        if log.exists():
            tag = f"[GroupId {self.group}]"
            lines += [x for x in log.read_text(errors="replace").splitlines() if tag in x]
        lines.append(f"# problems ({len(problems)})")
        lines += problems
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path
