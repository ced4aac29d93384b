"""Report sections of the focused runs: ``benchmarks.leave`` and ``benchmarks.idle_ab``."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

__all__ = ["idle_ab_section", "latency_ab_section", "leave_section"]


def leave_section(payload: dict[str, Any], _out: Path) -> list[str]:
    """Graceful leave, many rounds at random heartbeat phases (``python -m benchmarks.leave``)."""
    result = payload["result"]
    lines = [
        f"## Graceful leave, {result['rounds']} rounds (`{payload['command']}`)",
        "",
        "Two members stay; per round a third joins, the group converges, and after a random "
        "fraction of a heartbeat interval the third calls `close()`. *Converge* runs from the "
        "start of `close()` until both survivors own every partition (ours: their STABLE state) "
        "and the broker agrees; *close()* is how long that call took. Ours and confluent-kafka's "
        f"KIP-848 consumer alternate round by round ({result['heartbeat_ms']} ms heartbeats).",
        "",
        "| implementation | converge mean (s) | median | min–max | stdev | close() median (s) |",
        "|---|---|---|---|---|---|",
    ]
    for impl, stats in result["stats"].items():
        converge, close = stats["converge_s"], stats["close_s"]
        lines.append(
            f"| {impl} | {converge['mean']:.3f} | {converge['median']:.3f} | "
            f"{converge['min']:.3f}–{converge['max']:.3f} | {result['stdev_s'][impl]:.3f} | "
            f"{close['median']:.3f} |"
        )
    lines += [
        "",
        f"Mean difference (ours − confluent): {result['mean_difference_s'] * 1000:+.0f} ms.",
        "",
    ]
    return lines


def idle_ab_section(payload: dict[str, Any], _out: Path, title: str) -> list[str]:
    """Idle CPU per member: this revision, a baseline revision, confluent (interleaved)."""
    result = payload["result"]
    values: dict[str, list[float]] = result["values"]
    keys = sorted({key.rsplit("/", 1)[0] for key in values}, key=_broker_count)
    lines = [
        f"## Idle CPU per member, {title} (`{payload['command']}`)",
        "",
        "N idle members (one partition each) in one fresh process, CPU over the window after "
        "they settled, % of one core per member. *ours* is this revision, *baseline* the "
        "revision before the idle-cost work (`git archive 2defc11`), run alternately with "
        "confluent-kafka's KIP-848 consumer on the same broker; every value is listed.",
        "",
        "| broker / members | ours | baseline | confluent-kafka KIP-848 | ours / confluent |",
        "|---|---|---|---|---|",
    ]
    medians = result["medians"]
    for key in keys:
        cells = [_cell(values.get(f"{key}/{name}", [])) for name in _VARIANTS]
        theirs = medians.get(f"{key}/confluent-848", 0.0)
        ours = medians.get(f"{key}/ours", 0.0)
        factor = f"{ours / theirs:.1f}×" if theirs else "n/a"
        lines.append(f"| {key} | {' | '.join(cells)} | {factor} |")
    lines.append("")
    return lines


_VARIANTS = ("ours", "baseline", "confluent-848")


def _cell(values: list[float]) -> str:
    if not values:
        return "–"
    median = statistics.median(values)
    return f"{median:.3f} % ({', '.join(f'{v:.2f}' for v in values)})"


def _broker_count(key: str) -> tuple[str, int]:
    broker, count = key.split("/")
    return broker, int(count)


def latency_ab_section(payload: dict[str, Any], _out: Path) -> list[str]:
    """Ack and delivery latency, this revision vs the baseline (``benchmarks.latency_ab``)."""
    summaries = payload["result"]["summaries"]
    lines = [
        f"## Ack and delivery latency, this revision vs the baseline (`{payload['command']}`)",
        "",
        "*ack*: from a heartbeat answer with a new assignment to the acknowledging heartbeat "
        "(1 member, partitions added in steps); *ack-sdk*: the same without the OffsetFetch "
        "round trips; *delivery*: from `produce()` to the idle member's `poll()` returning the "
        "record. *baseline* is the revision before the idle-cost work (2defc11); the trees "
        "alternate per repetition on the same broker.",
        "",
        "| measure / variant | samples | p50 (ms) | p99 (ms) | max (ms) |",
        "|---|---|---|---|---|",
    ]
    for key in sorted(summaries):
        stats = summaries[key]
        lines.append(
            f"| {key} | {stats['n']} | {stats['p50_ms']:.1f} | {stats['p99_ms']:.1f} | "
            f"{stats['max_ms']:.1f} |"
        )
    lines.append("")
    return lines
