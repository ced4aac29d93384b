"""What a timeline plot shows, computed from the events alone (no matplotlib): members in order,
hand-over gaps, double ownership, and ownership cut at a member's death.

Used by :mod:`consumer.testing.plotting`; handy on its own to assert on a run (for example "no
partition was without an owner for more than 500 ms": :func:`ownership_gaps`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from consumer.testing import timeline_events as ev
from consumer.testing.timeline import Timeline

__all__ = [
    "cut_at_death",
    "double_ownership",
    "killed_at",
    "load_events",
    "members_in_order",
    "ownership_gaps",
    "partitions_label",
    "time_of",
]


def load_events(source: Timeline | Iterable[ev.Event] | str | Path) -> list[ev.Event]:
    """The events of a timeline, of an event list, or of a JSON-lines file.

    Raises:
        ValueError: a line of the file is not a timeline event (the message names the line).
        FileNotFoundError: the file does not exist.
    """
    if isinstance(source, Timeline):
        return source.events()
    if isinstance(source, str | Path):
        timeline = Timeline()
        timeline.merge_jsonl(Path(source))
        return timeline.events()
    return list(source)


def time_of(event: ev.Event) -> list[int]:
    """The times (milliseconds) an event covers: its start, and its end when it has one."""
    match event:
        case ev.Ownership():
            return [event.owned_from_ms] + (
                [] if event.owned_to_ms is None else [event.owned_to_ms]
            )
        case ev.Fault():
            return [event.start_ms] + ([] if event.end_ms is None else [event.end_ms])
        case _:
            return [event.at_ms]


def members_in_order(events: list[ev.Event]) -> list[str]:
    """Members in order of first appearance."""
    first: dict[str, int] = {}
    for event in events:
        member = getattr(event, "member", None)
        if isinstance(member, str):
            at = min(time_of(event))
            first[member] = min(first.get(member, at), at)
    return sorted(first, key=lambda m: (first[m], m))


def killed_at(events: list[ev.Event]) -> dict[str, list[int]]:
    """When each member was killed or fenced by a recorded fault (its lane ends there)."""
    deaths: dict[str, list[int]] = defaultdict(list)
    for event in events:
        match event:
            case ev.Fault(kind=ev.KILL | ev.FENCE, member=str() as member, start_ms=start):
                deaths[member].append(start)
    return {member: sorted(times) for member, times in deaths.items()}


def cut_at_death(events: list[ev.Event]) -> list[ev.Event]:
    """Ownership left open by a member that was killed ends at its death."""
    deaths = killed_at(events)
    out: list[ev.Event] = []
    for event in events:
        if isinstance(event, ev.Ownership) and event.owned_to_ms is None:
            after = [t for t in deaths.get(event.member, []) if t >= event.owned_from_ms]
            if after:
                event = ev.Ownership(
                    event.member, event.topic, event.partition, event.owned_from_ms, after[0]
                )
        out.append(event)
    return out


def partitions_label(owned: set[tuple[str, int]]) -> str:
    """``0,1,2`` for partitions of one topic, ``a[0,1] b[2]`` for several."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in owned:
        by_topic[topic].append(partition)
    if len(by_topic) == 1:
        return ",".join(str(p) for p in sorted(next(iter(by_topic.values()))))
    return " ".join(
        f"{t}[{','.join(str(p) for p in sorted(ps))}]" for t, ps in sorted(by_topic.items())
    )


def ownership_gaps(events: Iterable[ev.Event], end_ms: int) -> list[tuple[int, int, str, int]]:
    """``(start_ms, stop_ms, topic, partition)`` for every stretch in which a partition that
    had been owned had no owner until someone owned it again."""
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for o in events:
        if isinstance(o, ev.Ownership):
            stop = end_ms if o.owned_to_ms is None else o.owned_to_ms
            by_partition[(o.topic, o.partition)].append((o.owned_from_ms, stop))
    gaps: list[tuple[int, int, str, int]] = []
    for (topic, partition), spans in sorted(by_partition.items()):
        spans.sort()
        covered_to = spans[0][1]
        for start, stop in spans[1:]:
            if start > covered_to:
                gaps.append((covered_to, start, topic, partition))
            covered_to = max(covered_to, stop)
    return gaps


def double_ownership(
    events: Iterable[ev.Event], end_ms: int
) -> list[tuple[int, int, str, int, str, str]]:
    """``(start_ms, stop_ms, topic, partition, member_a, member_b)`` for every stretch in which
    two members owned one partition at once (the first invariant of
    :func:`~consumer.testing.invariants.check`, drawn by :func:`consumer.testing.plotting.plot`)."""
    by_partition: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for o in events:
        if isinstance(o, ev.Ownership):
            stop = end_ms if o.owned_to_ms is None else o.owned_to_ms
            by_partition[(o.topic, o.partition)].append((o.owned_from_ms, stop, o.member))
    found: list[tuple[int, int, str, int, str, str]] = []
    for (topic, partition), spans in sorted(by_partition.items()):
        spans.sort()
        for index, (_, stop_a, a) in enumerate(spans):
            for start_b, stop_b, b in spans[index + 1 :]:
                if start_b >= stop_a:
                    break
                if a != b:
                    found.append((start_b, min(stop_a, stop_b), topic, partition, a, b))
    return found
