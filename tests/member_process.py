"""One group member in its own process, for the tests that kill, pause or cut off a member.

Started by :func:`spawn` (``python -m tests.member_process SPEC``); read back by
:class:`MemberView`. ``SPEC`` is a JSON object:

* ``name``, ``file`` (the JSON-lines file it writes), ``topics``, ``config`` (the whole client
  configuration) and ``impl`` (``"ours"``, the default, or ``"confluent"``: see
  :func:`tests.support.build_consumer`);
* ``commit``: ``"batch"`` (the default: each batch is committed synchronously once processed,
  and ``on_revoke`` commits what was processed of the revoked partitions) or ``"none"`` (never
  commits; the configuration decides about auto-commit);
* ``batch`` (records per ``consume()``, default 200) and ``batch_delay_s`` (processing time of a
  batch, default 0: a kill then lands while the member still has records to do);
* ``exit_on_exception``: an exception raised by ``consume()`` ends the process (default: it is
  recorded and the member goes on until one is fatal or 20 have been raised);
* the faults of the reliability tier: ``revoke_delay_s``, ``slow_revoke_trigger`` and
  ``slow_revoke_s`` (a slow ``on_revoke``), ``late_commit_revoked`` (commit revoked partitions
  afterwards), ``assign_raise_once`` (``on_assign`` raises once), ``hold_first_assign_file``
  (the first ``on_assign`` with partitions returns only once that file exists), ``poll_gaps_s``
  (no poll for that long, once STABLE, and only while the member is STABLE).

The member subscribes, consumes in batches, processes each record (records it), commits as
``commit`` says, and stops on SIGTERM with ``close()`` (a graceful leave). Everything goes to
one JSON-lines file, one flushed line per event, so a SIGKILL loses at most a torn last line:

* timeline events in :class:`consumer.testing.timeline.Timeline` form, wall-clock stamped:
  ``assigned`` (when ``on_assign`` starts), ``revoked`` (when ``on_revoke``/``on_lost``
  returns), ``processed`` (one per record, before the record counts as done), ``commit`` (each
  partition a synchronous commit returned without error), ``state`` (``on_state_change``, ours
  only);
* side events (type ``x``, read by the tests only): ``callback`` (the same callback edges with
  a ``time.monotonic()`` stamp ``mono``, system-wide on Linux and so comparable with the test's
  own stamps), ``revoke_start``/``lost_start`` (partitions), ``value`` (partition, offset, value
  of each record), ``error`` (``error_cb``), ``commit_failed``, ``exception`` (raised by
  ``consume()``), ``slow_revoke``, ``late_commit``, ``gap``, ``connect`` (ours only: each
  connection attempt of the control plane), ``member_id``, ``closed``, ``started`` (the
  consumer is built, just before ``subscribe()``: what came before is the process's start),
  ``commit_start`` (each commit call as it begins; only with ``KGM_MEMBER_LIBRDKAFKA_DEBUG``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import wall_clock_ms
from tests.support import OURS, build_consumer

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Diagnostics: librdkafka ``debug`` contexts (e.g. ``cgrp,consumer,protocol``) for confluent
#: members, logged to the member's stderr; when set, every member also records a
#: ``commit_start`` side event as each commit call begins.
LIBRDKAFKA_DEBUG_ENV = "KGM_MEMBER_LIBRDKAFKA_DEBUG"


def spawn(spec: Mapping[str, Any], stderr_path: Path) -> subprocess.Popen[bytes]:
    """Start a member process running ``spec``; its stderr goes to ``stderr_path``."""
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    with open(stderr_path, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.member_process", json.dumps(dict(spec))],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path},
        )


@dataclass
class MemberView:
    """What one member process wrote so far (read incrementally from its JSON-lines file)."""

    path: Path
    name: str
    state: str = "(none)"
    states: list[tuple[int, str]] = field(default_factory=list)
    owned: set[tuple[str, int]] = field(default_factory=set)
    processed: int = 0
    side: list[dict[str, Any]] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    _offset: int = 0

    def refresh(self) -> MemberView:
        """Read what was added since the last call (a torn last line waits for its end)."""
        if not self.path.exists():
            return self
        with open(self.path, "rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        end = data.rfind(b"\n")
        if end < 0:
            return self
        self._offset += end + 1
        for raw in data[: end + 1].splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            self.lines.append(line)
            kind = line["type"]
            if kind == "state":
                self.state = line["state"]
                self.states.append((line["at_ms"], line["state"]))
            elif kind == "assigned":
                self.owned.add((line["topic"], line["partition"]))
            elif kind == "revoked":
                self.owned.discard((line["topic"], line["partition"]))
            elif kind == "processed":
                self.processed += 1
            elif kind == "x":
                self.side.append(line)
        return self

    def side_events(self, kind: str) -> list[dict[str, Any]]:
        self.refresh()
        return [s for s in self.side if s["kind"] == kind]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """Every timeline line of type ``kind`` (``processed``, ``commit``...) so far."""
        self.refresh()
        return [line for line in self.lines if line["type"] == kind]


# ----------------------------------------------------------------------------------------------
# The member (runs in the child process)


class Member:
    """The member's behaviour; see the module docstring."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.path = Path(spec["file"])
        self.commits = spec.get("commit", "batch") == "batch"
        self.timeline = Timeline()
        self.timeline.stream_to(self.path)
        self._side = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in run()
        self._lock = threading.Lock()
        self.positions: dict[tuple[str, int], int] = {}
        self.owned: set[tuple[str, int]] = set()
        self.stop = threading.Event()
        self.assign_raised = False
        self.assign_held = False
        self.revoked_pending: list[tuple[str, int, int]] = []
        self.stable_seen = threading.Event()
        self.state_now = ""
        impl = spec.get("impl", OURS)
        config: dict[str, Any] = {**spec["config"], "error_cb": self.on_error}
        if impl == OURS:
            config["on_state_change"] = self.on_state_change
            self._count_control_plane_connects()
        elif os.environ.get(LIBRDKAFKA_DEBUG_ENV):
            config["debug"] = os.environ[LIBRDKAFKA_DEBUG_ENV]  # logged to the member's stderr
        self.trace_commits = bool(os.environ.get(LIBRDKAFKA_DEBUG_ENV))
        self.consumer = build_consumer(config, impl)

    def _count_control_plane_connects(self) -> None:
        """Record each connection attempt of our control plane (side event ``connect``).

        The proxy in front of the member also carries librdkafka's data-plane connections, so
        it cannot tell whose backoff it sees; this counts ours alone.
        """
        from consumer._runtime import connection

        original = connection.BrokerConnection._open_session
        member = self

        async def open_session(self: Any) -> Any:
            member.side("connect")
            return await original(self)

        connection.BrokerConnection._open_session = open_session  # type: ignore[method-assign]

    # -- recording ---------------------------------------------------------------------------

    def side(self, kind: str, **fields: Any) -> None:
        line = {"type": "x", "kind": kind, "member": self.name, "at_ms": wall_clock_ms(), **fields}
        with self._lock:
            self._side.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._side.flush()

    def callback(self, kind: str, keys: list[tuple[str, int]]) -> None:
        self.side("callback", callback=kind, partitions=keys, mono=time.monotonic())

    def on_state_change(self, _previous: str, current: str) -> None:
        self.timeline.state(self.name, current)
        self.state_now = current
        if current == "STABLE":
            self.stable_seen.set()

    def on_error(self, error: KafkaError) -> None:
        self.side(
            "error", code=error.code(), name=error.name(), text=error.str(), fatal=error.fatal()
        )

    # -- callbacks ---------------------------------------------------------------------------

    def on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.callback("assign", [(tp.topic, tp.partition) for tp in partitions])
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key in self.owned:
                self.side("anomaly", what=f"assigned already owned {key}")
                continue
            self.owned.add(key)
            self.timeline.assigned(self.name, tp.topic, tp.partition)
        hold = self.spec.get("hold_first_assign_file")
        if hold and partitions and not self.assign_held:
            self.assign_held = True
            self.side("assign_hold", phase="start")
            deadline = time.monotonic() + 120
            while not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.02)  # the deliberate fault: on_assign runs until the test says
            self.side("assign_hold", phase="end")
        if self.spec.get("assign_raise_once") and not self.assign_raised and partitions:
            self.assign_raised = True
            raise RuntimeError("on_assign failed on purpose (reliability test)")

    def on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self.side("revoke_start", partitions=keys)
        delay = float(self.spec.get("revoke_delay_s", 0.0))
        trigger = self.spec.get("slow_revoke_trigger")
        if trigger and os.path.exists(trigger):
            os.unlink(trigger)
            delay = float(self.spec["slow_revoke_s"])
        if delay:
            self.side("slow_revoke", delay_s=delay, partitions=keys)
            time.sleep(delay)  # the deliberate fault: a callback slower than the rebalance timeout
        if self.commits:
            self.commit([k for k in keys if k in self.positions], where="revoke")
        if self.spec.get("late_commit_revoked"):
            self.revoked_pending += [
                (t, p, self.positions[(t, p)]) for t, p in keys if (t, p) in self.positions
            ]
        self._release(keys)
        self.callback("revoke", keys)

    def on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self.side("lost_start", partitions=keys)
        self._release(keys)
        self.callback("lost", keys)

    def _release(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            self.positions.pop(key, None)
            if key in self.owned:
                self.owned.discard(key)
                self.timeline.revoked(self.name, key[0], key[1])
            else:
                self.side("anomaly", what=f"released not owned {key}")

    # -- commits -----------------------------------------------------------------------------

    def commit(self, keys: list[tuple[str, int]], *, where: str) -> None:
        offsets = [TopicPartition(t, p, self.positions[(t, p)]) for t, p in keys]
        if not offsets:
            return
        if self.trace_commits:
            self.side(
                "commit_start",
                where=where,
                partitions=[[tp.topic, tp.partition, tp.offset] for tp in offsets],
            )
        try:
            result = self.consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as exc:  # noqa: BLE001 - a refused commit is an outcome to record
            self.side(
                "commit_failed",
                where=where,
                error=str(exc),
                partitions=[[tp.topic, tp.partition, tp.offset] for tp in offsets],
            )
            return
        for tp in result or offsets:
            if tp.error is None:
                self.timeline.commit(self.name, tp.topic, tp.partition, tp.offset)
            else:
                self.side(
                    "commit_failed",
                    where=where,
                    error=str(tp.error),
                    partitions=[[tp.topic, tp.partition, tp.offset]],
                )

    def late_commit(self) -> None:
        """Commit revoked partitions after their revocation (must not succeed)."""
        pending, self.revoked_pending = self.revoked_pending, []
        for topic, partition, position in pending:
            bogus = position + 1000
            try:
                result = self.consumer.commit(
                    offsets=[TopicPartition(topic, partition, bogus)], asynchronous=False
                )
                errors = [str(tp.error) for tp in result or [] if tp.error is not None]
                outcome = "rejected" if errors else "accepted"
                detail = "; ".join(errors)
            except Exception as exc:  # noqa: BLE001
                outcome, detail = "raised", str(exc)
            self.side(
                "late_commit", partition=[topic, partition, bogus], outcome=outcome, detail=detail
            )

    # -- main loop ---------------------------------------------------------------------------

    def run(self) -> int:
        self.side("started", impl=self.spec.get("impl", OURS))  # interpreter up, consumer built
        self.consumer.subscribe(
            self.spec["topics"],
            on_assign=self.on_assign,
            on_revoke=self.on_revoke,
            on_lost=self.on_lost,
        )
        gaps = [float(g) for g in self.spec.get("poll_gaps_s", [])]
        batch_size = int(self.spec.get("batch", 200))
        batch_delay_s = float(self.spec.get("batch_delay_s", 0.0))
        exit_on_exception = bool(self.spec.get("exit_on_exception"))
        failed = 0
        member_id_recorded = False
        while not self.stop.is_set():
            if not member_id_recorded and self.stable_seen.is_set():
                self.side("member_id", id=self.consumer.memberid())
                member_id_recorded = True
            if self.revoked_pending:
                self.late_commit()
            if gaps and self.stable_seen.is_set() and self.state_now == "STABLE" and self.owned:
                gap = gaps.pop(0)
                self.side("gap", seconds=gap, phase="start")
                time.sleep(gap)  # the deliberate fault: no poll() for longer than allowed
                self.side("gap", seconds=gap, phase="end")
                self.stable_seen.clear()
            try:
                messages = self.consumer.consume(batch_size, 0.1)
            except Exception as exc:  # noqa: BLE001 - recorded; the test judges it
                fatal = bool(getattr(getattr(exc, "args", [None])[0], "fatal", lambda: False)())
                self.side("exception", error=f"{type(exc).__name__}: {exc}", fatal=fatal)
                if exit_on_exception:
                    raise
                failed += 1
                if fatal or failed > 20:
                    break
                continue
            done: set[tuple[str, int]] = set()
            for message in messages:
                if message.error() is not None:
                    self.side(
                        "error",
                        code=message.error().code(),
                        name=message.error().name(),
                        text=message.error().str(),
                        fatal=message.error().fatal(),
                    )
                    continue
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                self.timeline.processed(self.name, topic, partition, offset)
                value = message.value()
                self.side("value", p=partition, o=offset, v=int(value) if value else None)
                self.positions[(topic, partition)] = offset + 1
                done.add((topic, partition))
            if done and batch_delay_s:
                time.sleep(batch_delay_s)  # simulated processing time, so a kill lands mid-stream
            if done and self.commits:
                self.commit(sorted(done), where="batch")
        try:
            self.consumer.close()
            self.side("closed")
        except Exception as exc:  # noqa: BLE001
            self.side("exception", error=f"close: {type(exc).__name__}: {exc}", fatal=False)
        self.timeline.close()
        self._side.close()
        return 0


def main() -> int:
    member = Member(json.loads(sys.argv[1]))
    signal.signal(signal.SIGTERM, lambda _sig, _frame: member.stop.set())
    return member.run()


if __name__ == "__main__":
    sys.exit(main())
