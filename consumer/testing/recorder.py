"""Record a real :class:`consumer.Consumer` into a :class:`~consumer.testing.timeline.Timeline`.

::

    timeline = Timeline()
    record(consumer, timeline, member="worker-1")   # before or after subscribe()
    ...                                             # poll() as usual
    timeline.write_jsonl(Path("run.jsonl"))         # then: kgm timeline plot run.jsonl -o run.png

The recorder is a listener of :meth:`consumer.Consumer.add_member_listener`: state changes
become :class:`~consumer.testing.timeline_events.StateChange` events (with the epoch), epoch
moves :class:`~consumer.testing.timeline_events.EpochChange`, and rebalance callbacks both
:class:`~consumer.testing.timeline_events.Callback` markers and ownership intervals
(``assigned`` opens one, ``revoked`` / ``lost`` closes it). Events are recorded on the thread
that polls, stamped with the wall-clock time at which they happened, so timelines of several
consumers (threads or processes) line up.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from consumer._bridge.member_events import MemberEvent, MemberListener, RebalanceEvent
from consumer.testing.timeline import Timeline

__all__ = ["TimelineRecorder", "record"]


class _Observable(Protocol):
    """What the recorder needs of a consumer (``consumer.Consumer`` has it)."""

    def add_member_listener(self, listener: MemberListener) -> None: ...

    def remove_member_listener(self, listener: MemberListener) -> None: ...


class TimelineRecorder:
    """A member listener that records into ``timeline`` under the name ``member``.

    Call it with events yourself, or let :func:`record` register it on a consumer.
    """

    def __init__(self, timeline: Timeline, member: str) -> None:
        if not member:
            raise ValueError("member must be a non-empty name for the timeline lane")
        self.timeline = timeline
        self.member = member
        self._owned: set[tuple[str, int]] = set()
        self._consumer: _Observable | None = None

    def __call__(self, event: MemberEvent) -> None:
        """Record one member event."""
        timeline, member = self.timeline, self.member
        if isinstance(event, RebalanceEvent):
            self._rebalance(event)
            return
        if event.current != event.previous:
            timeline.state(member, event.current, event.at_ms, epoch=event.member_epoch)
        if event.member_epoch != event.previous_epoch:
            timeline.epoch(member, event.member_epoch, event.at_ms)

    def _rebalance(self, event: RebalanceEvent) -> None:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in event.partitions:
            by_topic[topic].append(partition)
        for topic, partitions in sorted(by_topic.items()):
            self.timeline.callback(self.member, event.kind, topic, partitions, event.at_ms)
        for key in event.partitions:
            if event.kind == "assigned" and key not in self._owned:
                self._owned.add(key)
                self.timeline.assigned(self.member, *key, at_ms=event.at_ms)
            elif event.kind != "assigned" and key in self._owned:
                self._owned.discard(key)
                self.timeline.revoked(self.member, *key, at_ms=event.at_ms)

    def attach(self, consumer: _Observable) -> None:
        """Start recording ``consumer``'s events."""
        if self._consumer is not None:
            raise ValueError(f"recorder {self.member!r} is already attached to a consumer")
        consumer.add_member_listener(self)
        self._consumer = consumer

    def stop(self) -> None:
        """Stop recording (ownership still open stays open in the timeline)."""
        if self._consumer is not None:
            self._consumer.remove_member_listener(self)
            self._consumer = None


def record(consumer: _Observable, timeline: Timeline, member: str) -> TimelineRecorder:
    """Record ``consumer``'s state changes, epochs and rebalance callbacks into ``timeline``
    under the lane name ``member``; returns the recorder (``stop()`` ends recording)."""
    recorder = TimelineRecorder(timeline, member)
    recorder.attach(consumer)
    return recorder
