"""Draw a rebalance timeline: one lane per member, what it owned when, and why.

:func:`plot` takes a :class:`~consumer.testing.timeline.Timeline`, its events, or a JSON-lines
file (:meth:`~consumer.testing.timeline.Timeline.write_jsonl`) and writes a PNG (or any format
matplotlib knows from the suffix). Each member's lane shows:

* bars: the partitions it owned, labelled with their ids (one bar per stretch of constant
  ownership);
* a thin band under the bars, coloured by member state (JOINING, RECONCILE_ASSIGNMENT, STABLE...);
* ``e<N>`` ticks where its member epoch moved;
* markers where a rebalance callback ran: assigned (▲), revoked (▼), lost (✖).

A top lane, "no owner", shows in red every stretch during which a partition that had been owned
had no owner (the hand-over gaps of a rebalance), and the same stretches are shaded across the
whole figure. A partition owned by two members at once (an invariant violation) is hatched in
purple on the same lane, naming both. Faults recorded in the timeline are dotted lines (grey
spans while they last) on their member's lane.

matplotlib is needed (``pip install 'kafka-group-member[testing]'``); it is imported only when
drawing. :func:`draw_lanes` is the bar-drawing step on its own, also used by the benchmarks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consumer.testing import timeline_events as ev
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_spans import (
    cut_at_death,
    double_ownership,
    killed_at,
    load_events,
    members_in_order,
    ownership_gaps,
    partitions_label,
    time_of,
)

__all__ = [
    "Lane",
    "Span",
    "double_ownership",
    "draw_lanes",
    "load_events",
    "ownership_gaps",
    "plot",
]

#: Colours of the member states in the band under each lane (unknown states are grey).
STATE_COLOURS = {
    "UNSUBSCRIBED": "#bbbbbb",
    "JOINING": "#f2b880",
    "RECONCILE_ASSIGNMENT": "#dd8452",
    "ACK_ASSIGNMENT": "#c9a227",
    "STABLE": "#55a868",
    "FENCED": "#c44e52",
    "UNSUBSCRIBING": "#8172b3",
    "STALE": "#937860",
    "FATAL": "#000000",
}
_CALLBACK_MARKERS = {
    "assigned": ("^", "#2a7f3f"),
    "revoked": ("v", "#d17a00"),
    "lost": ("X", "#c44e52"),
}
_BAR_COLOUR = "#4c72b0"
_GAP_COLOUR = "#c44e52"
_DOUBLE_COLOUR = "#7b2d8e"


@dataclass(frozen=True)
class Span:
    """A bar from ``start`` to ``stop`` (x units of the axes) with an optional ``label``."""

    start: float
    stop: float
    label: str = ""


@dataclass(frozen=True)
class Lane:
    """One row of bars named ``name``."""

    name: str
    spans: tuple[Span, ...]


def _figure(width_in: float, height_in: float) -> Any:
    """A matplotlib figure outside pyplot (no global state, no backend switch), or a clear
    error naming the extra to install."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "plotting timelines needs matplotlib: pip install 'kafka-group-member[testing]'"
        ) from exc
    return Figure(figsize=(width_in, height_in))


def draw_lanes(
    ax: Any,
    lanes: Sequence[Lane],
    *,
    colour: str = _BAR_COLOUR,
    height: float = 0.8,
    offset: float = 0.0,
    label_min_width: float = 0.0,
    fontsize: float = 7,
) -> None:
    """Draw ``lanes`` as horizontal bars on matplotlib ``ax``, lane ``i`` centred at ``y = i``.

    A span's label is written inside its bar when the bar is at least ``label_min_width``
    wide; ``offset`` moves the bars up (positive) within the lane. Sets the y ticks to the
    lane names.
    """
    for row, lane in enumerate(lanes):
        for span in lane.spans:
            if span.stop <= span.start:
                continue
            centre = row + offset
            ax.broken_barh(
                [(span.start, span.stop - span.start)], (centre - height / 2, height), color=colour
            )
            if span.label and span.stop - span.start >= label_min_width:
                ax.text(
                    span.start,
                    centre,
                    " " + span.label,
                    va="center",
                    ha="left",
                    color="white",
                    fontsize=fontsize,
                    clip_on=True,
                )
    ax.set_yticks(range(len(lanes)), [lane.name for lane in lanes], fontsize=fontsize)


def _ownership_spans(spans: list[ev.Ownership], end_ms: int, t0_ms: int) -> tuple[Span, ...]:
    """Stretches of constant ownership of one member, labelled with the partitions."""
    edges: list[tuple[int, int, tuple[str, int]]] = []
    for o in spans:
        key = (o.topic, o.partition)
        edges.append((o.owned_from_ms, 1, key))
        edges.append((end_ms if o.owned_to_ms is None else o.owned_to_ms, -1, key))
    edges.sort(key=lambda e: (e[0], e[1]))
    owned: set[tuple[str, int]] = set()
    out: list[Span] = []
    start: int | None = None
    for at, delta, key in edges:
        if start is not None and at > start and owned:
            out.append(Span((start - t0_ms) / 1000, (at - t0_ms) / 1000, partitions_label(owned)))
        if delta > 0:
            owned.add(key)
        else:
            owned.discard(key)
        start = at
    return tuple(out)


def plot(
    source: Timeline | Iterable[ev.Event] | str | Path,
    out_path: str | Path,
    *,
    title: str | None = None,
    until_ms: int | None = None,
    width_in: float = 11.0,
    dpi: int = 110,
) -> Path:
    """Draw the timeline of ``source`` into ``out_path`` (see the module docstring); returns it.

    ``until_ms`` is when the run ended (default: its last event): ownership and states still
    open are drawn up to there.

    Raises:
        ValueError: the timeline has no member events, or a JSONL line is malformed.
        ImportError: matplotlib is missing (install the ``testing`` extra).
    """
    events = cut_at_death(load_events(source))
    members = members_in_order(events)
    if not members:
        raise ValueError("the timeline has no member events to plot")
    times = [t for event in events for t in time_of(event)]
    t0_ms, end_ms = min(times), max(times) if until_ms is None else max(*times, until_ms)
    end_ms = max(end_ms, t0_ms + 1)
    span_s = (end_ms - t0_ms) / 1000
    gaps = ownership_gaps(events, end_ms)
    doubles = double_ownership(events, end_ms)
    top = "no owner /\ntwo owners" if doubles else "no owner"
    lanes = [Lane(top, ())] + [
        Lane(
            m,
            _ownership_spans(
                [e for e in events if isinstance(e, ev.Ownership) and e.member == m], end_ms, t0_ms
            ),
        )
        for m in members
    ]
    fig = _figure(width_in, 1.4 + 0.75 * len(lanes))
    ax = fig.subplots()
    draw_lanes(ax, lanes, height=0.5, offset=0.08, label_min_width=span_s * 0.025)
    _draw_gaps(ax, gaps, t0_ms, span_s)
    _draw_doubles(ax, doubles, t0_ms, span_s)
    row_of = {m: row for row, m in enumerate(members, start=1)}
    _draw_states(ax, events, row_of, t0_ms, end_ms, killed_at(events))
    _draw_marks(ax, events, row_of, t0_ms)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(-0.02 * span_s, span_s * 1.02)
    ax.set_xlabel("seconds since the first event")
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(title or f"Rebalance timeline: {len(members)} member(s)")
    _legend(ax, events, bool(doubles))
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=dpi)
    return out


def _draw_gaps(ax: Any, gaps: list[tuple[int, int, str, int]], t0_ms: int, span_s: float) -> None:
    """The "no owner" lane (row 0): one red bar per stretch, labelled with its partitions and
    length, drawn at least visible however short; the stretch is shaded across all lanes."""
    grouped: dict[tuple[int, int], set[tuple[str, int]]] = defaultdict(set)
    for start, stop, topic, partition in gaps:
        grouped[(start, stop)].add((topic, partition))
    for index, ((start, stop), partitions) in enumerate(sorted(grouped.items())):
        x0 = (start - t0_ms) / 1000
        width = max((stop - start) / 1000, span_s * 0.004)
        ax.axvspan(x0, x0 + width, color=_GAP_COLOUR, alpha=0.08, lw=0, zorder=0)
        ax.broken_barh([(x0, width)], (-0.25, 0.5), color=_GAP_COLOUR)
        text = f"{partitions_label(partitions)}: {stop - start} ms"
        if width >= span_s * 0.12:
            ax.text(x0, 0, " " + text, va="center", color="white", fontsize=7, clip_on=True)
        else:
            y = -0.12 if index % 2 == 0 else 0.18
            ax.text(x0 + width, y, " " + text, va="center", color=_GAP_COLOUR, fontsize=6,
                    clip_on=True)  # fmt: skip


def _draw_doubles(
    ax: Any, doubles: list[tuple[int, int, str, int, str, str]], t0_ms: int, span_s: float
) -> None:
    """Invariant violations: two owners at once, hatched on the top lane and across the figure."""
    for start, stop, topic, partition, a, b in doubles:
        x0 = (start - t0_ms) / 1000
        width = max((stop - start) / 1000, span_s * 0.004)
        ax.axvspan(x0, x0 + width, color=_DOUBLE_COLOUR, alpha=0.12, lw=0, zorder=0)
        ax.broken_barh([(x0, width)], (-0.25, 0.5), facecolor="none", edgecolor=_DOUBLE_COLOUR,
                       hatch="////", lw=1.0)  # fmt: skip
        ax.text(x0 + width, -0.38, f" {topic}[{partition}]: {a} + {b}, {stop - start} ms",
                va="center", color=_DOUBLE_COLOUR, fontsize=6, clip_on=True)  # fmt: skip


def _draw_states(
    ax: Any,
    events: list[ev.Event],
    row_of: dict[str, int],
    t0_ms: int,
    end_ms: int,
    deaths: dict[str, list[int]],
) -> None:
    changes: dict[str, list[ev.StateChange]] = defaultdict(list)
    for event in events:
        if isinstance(event, ev.StateChange):
            changes[event.member].append(event)
    for member, states in changes.items():
        states.sort(key=lambda s: s.at_ms)
        for index, state in enumerate(states):
            if index + 1 < len(states):
                stop = states[index + 1].at_ms
            else:
                stop = next((t for t in deaths.get(member, []) if t >= state.at_ms), end_ms)
            ax.broken_barh(
                [((state.at_ms - t0_ms) / 1000, max(stop - state.at_ms, 0) / 1000)],
                (row_of[member] - 0.38, 0.12),
                color=STATE_COLOURS.get(state.state, "#999999"),
            )


def _draw_marks(ax: Any, events: list[ev.Event], row_of: dict[str, int], t0_ms: int) -> None:
    for event in events:
        match event:
            case ev.EpochChange(member=member, epoch=epoch, at_ms=at):
                x = (at - t0_ms) / 1000
                ax.plot(
                    [x, x], [row_of[member] + 0.36, row_of[member] + 0.44], color="black", lw=0.8
                )
                ax.text(x, row_of[member] + 0.45, f"e{epoch}", fontsize=6, ha="center", va="top")
            case ev.Callback(member=member, kind=kind, at_ms=at):
                marker, colour = _CALLBACK_MARKERS[kind]
                ax.plot(
                    [(at - t0_ms) / 1000],
                    [row_of[member] - 0.24],
                    marker=marker,
                    color=colour,
                    ms=5,
                    ls="none",
                )
            case ev.Fault(kind=kind, member=member, start_ms=start, end_ms=stop):
                rows = [row_of[member]] if member in row_of else list(row_of.values())
                x0 = (start - t0_ms) / 1000
                for row in rows:
                    if stop is not None and stop > start:
                        ax.broken_barh(
                            [(x0, (stop - start) / 1000)],
                            (row - 0.45, 0.9),
                            color="#888888",
                            alpha=0.3,
                        )
                    ax.plot([x0, x0], [row - 0.45, row + 0.45], color="black", lw=1.2, ls=":")
                    ax.text(x0, row - 0.45, f" {kind}", fontsize=7, va="top", color="black")


def _legend(ax: Any, events: list[ev.Event], doubles: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    seen_states = {e.state for e in events if isinstance(e, ev.StateChange)}
    handles: list[Any] = [
        Patch(color=_BAR_COLOUR, label="partitions owned"),
        Patch(color=_GAP_COLOUR, label="partition without owner"),
    ]
    if doubles:
        handles.append(
            Patch(facecolor="none", edgecolor=_DOUBLE_COLOUR, hatch="////", label="two owners")
        )
    handles += [
        Patch(color=STATE_COLOURS.get(s, "#999999"), label=s)
        for s in STATE_COLOURS
        if s in seen_states
    ]
    handles += [
        Patch(color=STATE_COLOURS.get(s, "#999999"), label=s)
        for s in sorted(seen_states - set(STATE_COLOURS))
    ]
    kinds = {e.kind for e in events if isinstance(e, ev.Callback)}
    handles += [
        Line2D([], [], marker=m, color=c, ls="none", label=f"{kind} callback")
        for kind, (m, c) in _CALLBACK_MARKERS.items()
        if kind in kinds
    ]
    if any(isinstance(e, ev.Fault) for e in events):
        handles.append(Line2D([], [], color="black", lw=1.2, ls=":", label="fault"))
    if any(isinstance(e, ev.EpochChange) for e in events):
        handles.append(Line2D([], [], color="black", lw=0.8, label="eN: member epoch"))
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False
    )
