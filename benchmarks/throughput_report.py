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


def throughput_headline(payload: dict[str, Any]) -> list[str]:
    """The throughput rows of the report's table of targets."""
    rows: list[str] = []
    for label, work in payload["result"]["workloads"].items():
        for key in ("c/b", "d/b"):
            value = work["ratios"][key]
            gap = (
                "" if value >= THROUGHPUT_TARGET else f" (short by {THROUGHPUT_TARGET - value:.3f})"
            )
            rows.append(
                f"| throughput {label} {key} | ≥ {THROUGHPUT_TARGET} | {value:.3f}{gap} | "
                f"{_verdict(value >= THROUGHPUT_TARGET)} |"
            )
        fair = work["ratios"]["d/b'"]
        rows.append(
            f"| throughput {label} d/b' (both consume(500); informational) | ≥ "
            f"{THROUGHPUT_TARGET} | {fair:.3f} | {_verdict(fair >= THROUGHPUT_TARGET)} |"
        )
        unbounded = (work.get("prefetch") or {}).get("unbounded")
        if unbounded:
            for key, target in (("c/b", THROUGHPUT_TARGET), ("d/b'", BATCH_TARGET)):
                value = unbounded["ratios"][key]
                rows.append(
                    f"| throughput {label} {key}, prefetch unbounded | ≥ {target} | "
                    f"{value:.3f} | {_verdict(value >= target)} |"
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
        "number of those pauses, for both clients, and runs of one call shape can fall into two "
        "modes (split below when two neighbouring rates differ by at least "
        f"{result.get('mode_gap', 2.0):g}×). *Prefetch unbounded* raises both limits for both "
        "clients (`queued.min.messages=10000000`, `queued.max.messages.kbytes=2097151`), so "
        "that the clients' own costs decide (benchmarks/analysis.md, session 11).",
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
    from benchmarks.throughput import IMPLEMENTATIONS, LABELS

    lines = [
        f"### {title}",
        "",
        "| implementation | median records/s | min–max | MB/s | vs (b) | median assigned "
        "after (s) | median first record (s) | steady state (first→last record) records/s | "
        "CPU µs / record: polling thread | process |",
        "|---|---|---|---|---|---|---|---|---|---|",
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
        lines.append(
            f"| {LABELS[impl]} | {stats['median']:,.0f} | {_range(stats, 0)} | "
            f"{stats['median'] * work['size'] / 1e6:.1f} | "
            f"{stats['median'] / base if base else 0:.2f} | {_fmt(assigned)} | "
            f"{_fmt(first)} | {_fmt(steady, 0)} | {_fmt(cpu[0])} | {_fmt(cpu[1])} |"
        )
    ratios = work["ratios"]
    lines += [
        "",
        "Ratios of medians: " + ", ".join(f"{k} = **{v:.2f}**" for k, v in ratios.items()),
    ]
    if "steady_ratios" in work:
        lines += [
            "",
            "Steady state (first→last record): "
            + ", ".join(f"{k} = {v:.2f}" for k, v in work["steady_ratios"].items()),
        ]
    lines.append("")
    return lines + _throughput_modes(work.get("modes") or {})


def _throughput_modes(modes: dict[str, Any]) -> list[str]:
    from benchmarks.throughput import LABELS, SHAPES

    split = {shape: entry for shape, entry in modes.items() if entry["threshold_records_per_s"]}
    if not split:
        return []
    lines = [
        "Runs in two modes, per call shape (threshold: the geometric mean of the two rates "
        "around the widest gap); ratio = median of the way / median of the shape's first way "
        "in the same mode (n/a: that way has no run in the mode):",
        "",
        "| call shape | mode | implementation | runs | median records/s | min–max | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape, entry in split.items():
        threshold = entry["threshold_records_per_s"]
        for mode, sign in (("low", "<"), ("high", "≥")):
            part = entry[mode]
            for impl in SHAPES[shape]:
                stats = part["stats"][impl]
                value = part["ratios"].get(impl)
                shown = "1.00 (base)" if impl == SHAPES[shape][0] else _fmt(value)
                lines.append(
                    f"| {shape} | {mode} ({sign} {threshold:,.0f}/s) | {LABELS[impl]} | "
                    f"{stats['n']} | {stats['median']:,.0f} | {_range(stats, 0)} | "
                    f"{shown if stats['n'] else 'n/a'} |"
                )
    return [*lines, ""]


def _median(values: list[Any]) -> float:
    clean = sorted(float(v) for v in values if v is not None)
    return clean[len(clean) // 2] if clean else float("nan")


def _trim_profile(text: str, keep: int = 28) -> list[str]:
    body = [line for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(body) if "_drain_" in line), 0)
    return body[start : start + keep]
