"""Record what a consumer group did during a run, then check it against the group's invariants.

A run's events, defined in :mod:`consumer.testing.timeline_events` (all times are milliseconds
on one clock, wall time by default, so events from several processes on one machine line up):

* :class:`Ownership`: ``member`` owned ``topic[partition]`` from ``owned_from_ms`` until
  ``owned_to_ms`` (``None``: until the end of the run, or until the member died);
* :class:`Commit`: a commit the broker *accepted*, ``offset`` being the next offset to read;
* :class:`Processed`: the application processed one record;
* :class:`Produced`: a record the test produced (and the broker acknowledged);
* :class:`Fault`: a fault on ``member`` (``None``: on the cluster) from ``start_ms`` to
  ``end_ms``. Kinds :data:`KILL` (SIGKILL) and :data:`FENCE` end the member's life at
  ``start_ms``; :data:`ISOLATING_FAULTS` (blackhole, drop, pause, partition) do so after
  ``session_timeout_ms`` when that is given to :func:`~consumer.testing.invariants.check`;
* :class:`StateChange`: the member entered ``state`` (``STABLE``, ``JOINING``, ``FENCED``...),
  with its ``epoch`` when known. Entering ``FENCED`` also ends the member's life at that time;
* :class:`EpochChange`: the coordinator gave the member a new epoch (with or without a state
  change);
* :class:`Callback`: a rebalance callback ran (``assigned``, ``revoked`` or ``lost``).

:func:`consumer.testing.recorder.record` fills a timeline from a real
:class:`consumer.Consumer`; :func:`consumer.testing.plotting.plot` draws one.

:class:`Timeline` records events from any number of threads; member subprocesses stream theirs
to JSON-lines files (:meth:`Timeline.stream_to`) that the test merges afterwards
(:meth:`Timeline.merge_jsonl`; a line cut short by SIGKILL is ignored).
:func:`consumer.testing.invariants.check` returns a
:class:`~consumer.testing.invariants.CheckReport` with counts and a readable explanation of every
violation.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from consumer.testing import timeline_events as ev

__all__ = ["Timeline"]

_Key = tuple[str, str, int]  # member, topic, partition


class Timeline:
    """A thread-safe event log of one run. ``clock_ms`` stamps events recorded without a time."""

    def __init__(self, clock_ms: Callable[[], int] = ev.wall_clock_ms) -> None:
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._events: list[ev.Event] = []
        self._open: dict[_Key, int] = {}  # assigned, not yet revoked: owned_from_ms
        self._sink: IO[str] | None = None

    # -- recording ---------------------------------------------------------------------------

    def record(self, event: ev.Event) -> None:
        """Append one event."""
        with self._lock:
            self._events.append(event)
            self._write({"type": ev.EVENT_NAMES[type(event)], **asdict(event)})

    def assigned(self, member: str, topic: str, partition: int, at_ms: int | None = None) -> None:
        """``member`` starts owning ``topic[partition]`` (closes with :meth:`revoked`)."""
        self._edge("assigned", member, topic, partition, self._at(at_ms), stream=True)

    def revoked(self, member: str, topic: str, partition: int, at_ms: int | None = None) -> None:
        """``member`` stops owning ``topic[partition]`` (revoked or lost)."""
        self._edge("revoked", member, topic, partition, self._at(at_ms), stream=True)

    def _edge(self, kind: str, member: str, topic: str, partition: int, at_ms: int,
              stream: bool) -> None:  # fmt: skip
        key = (member, topic, partition)
        with self._lock:
            if kind == "assigned":
                if key in self._open:
                    raise ValueError(f"{member} already owns {topic}[{partition}]")
                self._open[key] = at_ms
            else:
                start = self._open.pop(key, None)
                if start is None:
                    raise ValueError(f"{member} does not own {topic}[{partition}]")
                self._events.append(ev.Ownership(member, topic, partition, start, at_ms))
            if stream:
                line = {"member": member, "topic": topic, "partition": partition, "at_ms": at_ms}
                self._write({"type": kind, **line})

    def commit(
        self, member: str, topic: str, partition: int, offset: int, at_ms: int | None = None
    ) -> None:
        """An accepted commit of ``offset`` (the next offset to read)."""
        self.record(ev.Commit(member, topic, partition, offset, self._at(at_ms)))

    def processed(
        self, member: str, topic: str, partition: int, offset: int, at_ms: int | None = None
    ) -> None:
        """``member`` processed the record at ``offset``."""
        self.record(ev.Processed(member, topic, partition, offset, self._at(at_ms)))

    def produced(
        self, topic: str, partition: int, offsets: Iterable[int], at_ms: int | None = None
    ) -> None:
        """The run produced records at ``offsets`` of ``topic[partition]``."""
        at = self._at(at_ms)
        for offset in offsets:
            self.record(ev.Produced(topic, partition, offset, at))

    def fault(
        self, kind: str, member: str | None, start_ms: int | None = None, end_ms: int | None = None
    ) -> None:
        """A fault of ``kind`` on ``member`` (see the module docstring for kinds)."""
        self.record(ev.Fault(kind, member, self._at(start_ms), end_ms))

    def state(
        self, member: str, state: str, at_ms: int | None = None, epoch: int | None = None
    ) -> None:
        """``member`` entered ``state`` (at member ``epoch``, when known)."""
        self.record(ev.StateChange(member, state, self._at(at_ms), epoch))

    def epoch(self, member: str, epoch: int, at_ms: int | None = None) -> None:
        """``member``'s epoch became ``epoch``."""
        self.record(ev.EpochChange(member, epoch, self._at(at_ms)))

    def callback(
        self,
        member: str,
        kind: str,
        topic: str,
        partitions: Iterable[int],
        at_ms: int | None = None,
    ) -> None:
        """A rebalance callback (``assigned``, ``revoked`` or ``lost``) ran on ``member``."""
        self.record(ev.Callback(member, kind, topic, tuple(partitions), self._at(at_ms)))

    def _at(self, at_ms: int | None) -> int:
        return self._clock_ms() if at_ms is None else at_ms

    # -- reading -----------------------------------------------------------------------------

    def events(self) -> list[ev.Event]:
        """Every event so far; ownership still open has ``owned_to_ms=None``."""
        with self._lock:
            still_open = [
                ev.Ownership(m, t, p, start, None) for (m, t, p), start in self._open.items()
            ]
            return [*self._events, *still_open]

    # -- JSON lines --------------------------------------------------------------------------

    def stream_to(self, path: Path) -> None:
        """From now on, also append every recorded event to ``path`` (one flushed line each)."""
        with self._lock:
            self._sink = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def close(self) -> None:
        """Stop streaming (see :meth:`stream_to`)."""
        with self._lock:
            if self._sink is not None:
                self._sink.close()
                self._sink = None

    def _write(self, line: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._sink.flush()

    def write_jsonl(self, path: Path) -> None:
        """Write every event to ``path`` as JSON lines (readable by :meth:`merge_jsonl`)."""
        with open(path, "w", encoding="utf-8") as out:
            for event in self.events():
                out.write(json.dumps({"type": ev.EVENT_NAMES[type(event)], **asdict(event)}) + "\n")

    def merge_jsonl(self, path: Path) -> int:
        """Add the events of a JSON-lines file; returns how many lines were read.

        ``assigned``/``revoked`` pairs become :class:`Ownership` intervals (an ``assigned``
        without ``revoked`` stays open). A last line without its newline (the writer was killed
        mid-line) is ignored; any other malformed line raises ``ValueError``.
        """
        text = Path(path).read_text(encoding="utf-8")
        lines = text.split("\n")
        if lines and lines[-1] and not text.endswith("\n"):
            lines.pop()  # cut short by a kill
        count = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                kind = data.pop("type")
                if kind in ("assigned", "revoked"):
                    self._edge(kind, stream=False, **data)
                else:
                    with self._lock:
                        self._events.append(ev.EVENT_TYPES[kind](**data))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a timeline event: {exc}") from exc
            count += 1
        return count
