"""Section 1 of ``docs/benchmarks.md`` (throughput) and its rows in the table of targets."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

THROUGHPUT_TARGET = 0.95
#: consume(n) against confluent's consume(n) (issue #17: no batch penalty).
BATCH_TARGET = 1.0


def _fmt(value: float, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def _range(stats: dict[str, Any], digits: int = 2) -> str:
    return f"{_fmt(stats['min'], digits)}–{_fmt(stats['max'], digits)}"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _ratio_cell(part: dict[str, Any], key: str) -> tuple[float, str]:
    """The figure a target row is judged by and its cell: the ratio of busy rates (the time of
    fetch stalls left out) with the ratio of whole-run medians beside it; results written before
    the stalls were measured have only the latter."""
    whole = float(part["ratios"][key])
    busy = (part.get("busy_ratios") or {}).get(key)
    if busy is None:
        return whole, f"{whole:.3f}"
    return float(busy), f"{busy:.3f} (whole-run medians {whole:.3f})"


def throughput_headline(payload: dict[str, Any]) -> list[str]:
    """The throughput rows of the report's table of targets."""
    rows: list[str] = []
    for label, work in payload["result"]["workloads"].items():
        settings = [("", work)]
        if unbounded := (work.get("prefetch") or {}).get("unbounded"):
            settings.append((", prefetch unbounded", unbounded))
        for suffix, part in settings:
            keys = [("c/b", THROUGHPUT_TARGET), ("d/b'", BATCH_TARGET)]
            if not suffix:
                keys.insert(1, ("d/b", THROUGHPUT_TARGET))
            for key, target in keys:
                value, cell = _ratio_cell(part, key)
                gap = "" if value >= target else f"; short by {target - value:.3f}"
                rows.append(
                    f"| throughput {label} {key}{suffix} | ≥ {target} | {cell}{gap} | "
                    f"{_verdict(value >= target)} |"
                )
    return rows


def _plot_throughput(result: dict[str, Any], out: Path) -> str | None:
    import matplotlib

    from benchmarks.throughput import IMPLEMENTATIONS

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = result["workloads"]
    fig, axes = plt.subplots(1, len(workloads), figsize=(5 * len(workloads), 4), squeeze=False)
    for ax, (label, work) in zip(axes[0], workloads.items(), strict=True):
        stats = work["stats"]
        med = [stats[i]["median"] / 1000 for i in IMPLEMENTATIONS]
        low = [m - stats[i]["min"] / 1000 for m, i in zip(med, IMPLEMENTATIONS, strict=True)]
        high = [stats[i]["max"] / 1000 - m for m, i in zip(med, IMPLEMENTATIONS, strict=True)]
        colors = ["#888888", "#4c72b0", "#8fa9d6", "#dd8452", "#f2b880"]
        ax.bar(range(len(med)), med, yerr=[low, high], color=colors, capsize=3)
        ax.set_xticks(range(len(med)), ["a", "b", "b'", "c", "d"])
        ax.set_title(f"{work['count']:,} x {label}, 12 partitions")
        ax.set_ylabel("thousand records/s (median, min–max)")
    fig.suptitle("Throughput: a=confluent assign, b/b'=confluent KIP-848 poll/consume, c/d=ours")
    fig.tight_layout()
    path = out / "throughput.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path.name


def throughput_section(payload: dict[str, Any], out: Path) -> list[str]:
    """Section 1 of docs/benchmarks.md: tables, modes, plot and profiles."""
    result = payload["result"]
    lines = [
        "## 1. Throughput",
        "",
        "Records consumed to the end of a 12-partition topic (produced once, reused across runs); "
        "fresh group id per run, `auto.offset.reset=earliest`, default configuration otherwise. "
        "Rate = records / time from the partitions' assignment (first `on_assign`; right after "
        "`assign()` for (a)) to the last record: the group join is excluded (it is the "
        "*assigned after* column) but all fetching is included. Implementations and prefetch "
        "settings interleaved, order rotated per "
        f"repetition; {payload['repeat']} repetition(s). Targets: (c)/(b) and (d)/(b) ≥ 0.95. "
        "*CPU µs / record*: the polling thread's, and the whole process's (every thread), from "
        "the consumer's creation to its close.",
        "",
        "With librdkafka's default prefetch limits (100,000 records or 64 MiB queued, then a "
        "1 s `fetch.queue.backoff.ms` pause of every partition) a run's length is mostly a whole "
        "number of those pauses, for both clients, and its rate falls into one of a few modes, "
        "one per number of pauses (benchmarks/analysis.md, session 15). Each run therefore "
        "records its *stalls*: gaps of more than "
        f"{1000 * result.get('stall_s', 0.05):g} ms without a record (a `consume()` drain "
        "reads the clock after every batch, a `poll()` drain every 64th record). *Busy "
        "records/s* is a run's records over its time less its stalls; the target rows are "
        "judged by the ratio of the medians of busy rates, with the whole-run ratio beside it, "
        "and the runs are also compared at the same number of stalls (the table after each "
        "setting). *Prefetch unbounded* raises both limits for both clients "
        "(`queued.min.messages=10000000`, `queued.max.messages.kbytes=2097151`), so that "
        "nothing pauses the fetcher and the clients' own costs decide (session 11).",
        "",
    ]
    for label, work in result["workloads"].items():
        lines += _throughput_tables(f"{work['count']:,} records of {label}", work)
        for setting, part in (work.get("prefetch") or {}).items():
            lines += _throughput_tables(
                f"{work['count']:,} records of {label}, prefetch {setting}", {**work, **part}
            )
    name = _plot_throughput(result, out)
    if name:
        lines += [f"![throughput](benchmarks/{name})", ""]
    profiles = result.get("profiles") or {}
    if profiles:
        lines += [
            "### Where the time goes (pyinstrument, application thread, 100 B records)",
            "",
            "One extra run per implementation under pyinstrument (wall-clock, 0.5 ms sampling; "
            "not counted above). Trimmed to the call tree under `poll()`:",
            "",
        ]
        for key, text in profiles.items():
            lines += [f"`{key}`:", "", "```", *_trim_profile(text), "```", ""]
    return lines


def _throughput_tables(title: str, work: dict[str, Any]) -> list[str]:
    from benchmarks.throughput import IMPLEMENTATIONS, LABELS, SHAPES

    lines = [
        f"### {title}",
        "",
        "| implementation | median records/s | min–max | MB/s | vs (b) | stalls per run: "
        "median (min–max) | busy records/s | median assigned after (s) | median first record "
        "(s) | steady state (first→last record) records/s | CPU µs / record: polling thread | "
        "process |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = work["stats"]["confluent-848-poll"]["median"]
    thread_cpu = work.get("thread_cpu_us_per_record", {})
    process_cpu = work.get("process_cpu_us_per_record", {})
    for impl in IMPLEMENTATIONS:
        stats = work["stats"][impl]
        mine = [r for r in work["runs"] if r["impl"] == impl]
        assigned = _median([r.get("assigned_s") for r in mine])
        first = _median([r.get("first_record_s") for r in mine])
        steady = work.get("steady_stats", {}).get(impl, {}).get("median", float("nan"))
        cpu = [
            table.get(impl, {}).get("median", float("nan")) for table in (thread_cpu, process_cpu)
        ]
        stalls = work.get("stall_stats", {}).get(impl)
        busy = work.get("busy_stats", {}).get(impl, {}).get("median", float("nan"))
        lines.append(
            f"| {LABELS[impl]} | {stats['median']:,.0f} | {_range(stats, 0)} | "
            f"{stats['median'] * work['size'] / 1e6:.1f} | "
            f"{stats['median'] / base if base else 0:.2f} | "
            f"{_fmt(stalls['median'], 0) + ' (' + _range(stalls, 0) + ')' if stalls else 'n/a'} | "
            f"{_fmt(busy, 0)} | {_fmt(assigned)} | "
            f"{_fmt(first)} | {_fmt(steady, 0)} | {_fmt(cpu[0])} | {_fmt(cpu[1])} |"
        )
    ratios = work["ratios"]
    lines += [
        "",
        "Ratios of medians: " + ", ".join(f"{k} = **{v:.2f}**" for k, v in ratios.items()),
    ]
    for key, name in (("busy_ratios", "Busy rates"), ("steady_ratios", "Steady state")):
        if key in work:
            lines += ["", f"{name}: " + ", ".join(f"{k} = {v:.2f}" for k, v in work[key].items())]
    lines.append("")
    return lines + stalls_table(work.get("by_stalls") or {}, SHAPES, LABELS)


def stalls_table(
    table: dict[str, Any], shapes: dict[str, tuple[str, ...]], labels: dict[str, str]
) -> list[str]:
    """Each call shape's runs grouped by their number of fetch stalls (``by_stalls``), with the
    ratio to the shape's first way at the same number; nothing when every run had as many."""
    shown = {shape: rows for shape, rows in table.items() if len(rows) > 1}
    if not shown:
        return []
    lines = [
        "Runs by number of fetch stalls, per call shape; ratio = median of the way / median of "
        "the shape's first way with as many stalls (– : one of them has no such run):",
        "",
        "| call shape | stalls | implementation | runs | median records/s | min–max | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape, rows in shown.items():
        ways = shapes[shape]
        for stalls, part in rows.items():
            for way in ways:
                stats = part["stats"][way]
                if not stats["n"]:
                    continue
                value = part["ratios"].get(way)
                cell = (
                    "1.00 (base)" if way == ways[0] else ("–" if value is None else f"{value:.2f}")
                )
                lines.append(
                    f"| {shape} | {stalls} | {labels.get(way, way)} | {stats['n']} | "
                    f"{stats['median']:,.0f} | {_range(stats, 0)} | {cell} |"
                )
    return [*lines, ""]


def _median(values: list[Any]) -> float:
    clean = sorted(float(v) for v in values if v is not None)
    return clean[len(clean) // 2] if clean else float("nan")


def _trim_profile(text: str, keep: int = 28) -> list[str]:
    body = [line for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(body) if "_drain_" in line), 0)
    return body[start : start + keep]
