"""The "Share groups" section of ``docs/benchmarks.md`` and its plots, from ``share.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.report_format import pyplot as _pyplot

#: Target for every share throughput case: ours / confluent-kafka's ShareConsumer.
SHARE_THROUGHPUT_TARGET = 1.0
#: Idle share member: the same budget as an idle consumer-group member (% of one core).
SHARE_IDLE_CPU_TARGET = 1.0
COLORS = {"ours": "#dd8452", "confluent": "#4c72b0"}
REPRODUCE = "python -m benchmarks share --size full"


def _conditions(payload: dict[str, Any]) -> str:
    before = ", ".join(f"{x:.2f}" for x in payload["loadavg_before"])
    after = ", ".join(f"{x:.2f}" for x in payload["loadavg_after"])
    machine = payload["machine"]
    return (
        f"Conditions: `{payload['command']}`, {payload['size']} size, started "
        f"{payload['started_at']}, {payload['duration_s']:.0f} s; load average (1, 5, 15 min) "
        f"{before} before → {after} after, on {machine.get('cpu_count')} CPU(s); "
        f"confluent-kafka {machine.get('confluent_kafka')} / librdkafka "
        f"{machine.get('librdkafka')}; broker with 500 ms share heartbeats "
        "(`fast_share_group_settings`). Reproduce: "
        f"`{REPRODUCE}` (or `--size smoke` for the harness check)."
    )


def share_headline(payload: dict[str, Any]) -> list[str]:
    """Rows of the headline table (ours / confluent per throughput case; idle CPU)."""
    rows: list[str] = []
    result = payload["result"]
    for key, case in result["throughput"]["cases"].items():
        value = float(case["ratio"]["median"])
        ok = value >= SHARE_THROUGHPUT_TARGET
        gap = "" if ok else f" (short by {SHARE_THROUGHPUT_TARGET - value:.2f})"
        rows.append(
            f"| share throughput {key} ours/confluent | ≥ {SHARE_THROUGHPUT_TARGET:.1f} | "
            f"{value:.2f}{gap} | {'**met**' if ok else '**missed**'} |"
        )
    idle = result["idle_cost"]
    for n in idle["member_counts"]:
        cpu = float(idle["stats"][f"ours/{n}"]["cpu_pct_per_member"]["median"])
        theirs = float(idle["stats"][f"confluent/{n}"]["cpu_pct_per_member"]["median"])
        ok = cpu <= SHARE_IDLE_CPU_TARGET
        rows.append(
            f"| idle share member CPU, N={n} | ≤ {SHARE_IDLE_CPU_TARGET:.0f} % core | "
            f"{cpu:.2f} % (confluent {theirs:.2f} %) | {'**met**' if ok else '**missed**'} |"
        )
    return rows


def _plot_throughput(result: dict[str, Any], out: Path) -> str:
    plt = _pyplot()
    workloads = sorted({c["workload"] for c in result["cases"].values()}, key=lambda w: w != "100B")
    fig, axes = plt.subplots(1, len(workloads), figsize=(5.5 * len(workloads), 4.4), squeeze=False)
    for ax, workload in zip(axes[0], workloads, strict=True):
        cases = [c for c in result["cases"].values() if c["workload"] == workload]
        width = 0.38
        for offset, impl in ((-width / 2, "ours"), (width / 2, "confluent")):
            med = [c["stats"][impl]["median"] / 1000 for c in cases]
            low = [m - c["stats"][impl]["min"] / 1000 for m, c in zip(med, cases, strict=True)]
            high = [c["stats"][impl]["max"] / 1000 - m for m, c in zip(med, cases, strict=True)]
            xs = [x + offset for x in range(len(cases))]
            label = "ours (consumer.ShareConsumer)" if impl == "ours" else "confluent-kafka"
            ax.bar(xs, med, width, yerr=[low, high], capsize=3, color=COLORS[impl], label=label)
        for x, case in enumerate(cases):
            top = max(case["stats"][i]["max"] for i in ("ours", "confluent")) / 1000
            ax.annotate(
                f"{case['ratio']['median']:.2f}x",
                (x, top),
                ha="center",
                va="bottom",
                fontsize=8,
                xytext=(0, 3),
                textcoords="offset points",
            )
        names = [
            f"{c['mode']}\n{c['members']} member{'s' if c['members'] > 1 else ''}" for c in cases
        ]
        ax.set_xticks(range(len(cases)), names, fontsize=8)
        ax.set_title(
            f"{cases[0]['count']:,} records of {workload}, {result['partitions']} partitions"
        )
        ax.set_ylabel("thousand records/s (median, min–max)")
        ax.margins(y=0.15)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=9, bbox_to_anchor=(0.5, 0.93))
    fig.suptitle("Share-group throughput (label above each pair: ours / confluent, median)")
    fig.tight_layout(rect=(0, 0, 1, 0.86))
    path = out / "share_throughput.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path.name


def _plot_idle(idle: dict[str, Any], out: Path) -> str:
    plt = _pyplot()
    counts = idle["member_counts"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    width = 0.38
    for offset, impl in ((-width / 2, "ours"), (width / 2, "confluent")):
        stats = [idle["stats"][f"{impl}/{n}"]["cpu_pct_per_member"] for n in counts]
        med = [s["median"] for s in stats]
        low = [m - s["min"] for m, s in zip(med, stats, strict=True)]
        high = [s["max"] - m for m, s in zip(med, stats, strict=True)]
        xs = [x + offset for x in range(len(counts))]
        label = "ours (consumer.ShareConsumer)" if impl == "ours" else "confluent-kafka"
        bars = ax.bar(xs, med, width, yerr=[low, high], capsize=3, color=COLORS[impl], label=label)
        ax.bar_label(bars, [f"{m:.2f}" for m in med], fontsize=8, padding=2)
    ax.axhline(SHARE_IDLE_CPU_TARGET, color="#c44e52", ls=":", lw=1, label="1 % target")
    ax.set_xticks(range(len(counts)), [f"N = {n} in one process" for n in counts])
    ax.set_ylabel("% of one core per idle member")
    ax.margins(y=0.2)
    ax.legend(fontsize=8)
    ax.set_title(f"Idle share members ({idle['window_s']:.0f} s window)")
    fig.tight_layout()
    path = out / "share_idle_cost.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path.name


def _throughput_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| case (values / acks / members) | ours records/s: median (min–max) | confluent "
        "records/s: median (min–max) | ours / confluent: median (min–max) | records first "
        "delivered / expected, every run | redelivered | first record after subscribe (s), "
        "ours / confluent |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, case in result["cases"].items():
        ours, theirs, rel = case["stats"]["ours"], case["stats"]["confluent"], case["ratio"]
        consumed = sorted({(r["consumed"], r["expected"]) for r in case["runs"]})
        counts = ", ".join(f"{c:,}/{e:,}" for c, e in consumed)
        complete = all(r.get("complete") for r in case["runs"])
        first = case["first_record_s"]
        lines.append(
            f"| {key} | {ours['median']:,.0f} ({ours['min']:,.0f}–{ours['max']:,.0f}) | "
            f"{theirs['median']:,.0f} ({theirs['min']:,.0f}–{theirs['max']:,.0f}) | "
            f"**{rel['median']:.2f}** ({rel['min']:.2f}–{rel['max']:.2f}) | {counts}"
            f"{'' if complete else ' (**incomplete**)'} | "
            f"{sum(r['redelivered'] for r in case['runs'])} | "
            f"{first['ours']['median']:.2f} / {first['confluent']['median']:.2f} |"
        )
    return lines


def share_section(payload: dict[str, Any], out: Path) -> list[str]:
    """The whole "Share groups" section."""
    result = payload["result"]
    throughput, idle = result["throughput"], result["idle_cost"]
    repeat = payload["repeat"]
    lines = [
        "## 5. Share groups (KIP-932): `consumer.ShareConsumer` vs confluent-kafka's preview "
        "`ShareConsumer`",
        "",
        "### Throughput",
        "",
        "N records pre-produced once to a "
        f"{throughput['partitions']}-partition topic; each run uses a fresh share group with "
        "`share.auto.offset.reset=earliest` (set by IncrementalAlterConfigs on the GROUP "
        "resource before any member subscribes). **Every member runs in its own process** "
        "(forked from a server that imported both libraries once), also with 1 member: that is "
        "how share groups are deployed, and it keeps one process's GIL from deciding the 4-member "
        "result (our share consumer is pure Python; librdkafka fetches on C threads). Members "
        "are built, then told to subscribe at the same moment; each polls with `poll(0.25)` and, "
        "for explicit acks, calls `acknowledge(message)` (ACCEPT) on every record; implicit acks "
        "ACCEPT the previous batch at the next `poll`. Rate = records first delivered "
        "(`delivery_count() == 1`) / time from the first non-empty `poll` of any member to the "
        "last record handled by any member; the run ends when the members together hold every "
        "record (checked per partition against the end offsets). With 4 members the later "
        "joiners' join time falls inside the timed span (for both clients): the broker hands "
        "all partitions to the first member and rebalances as the others arrive. "
        f"Implementations alternate (ours, confluent, confluent, ours, ...); {repeat} "
        "repetition(s) per case; the ratio is the median of the per-repetition ratios "
        "(interleaved pairs), min–max in brackets. Target: ours / confluent ≥ 1.0.",
        "",
        *_throughput_table(throughput),
        "",
        f"![share throughput](benchmarks/{_plot_throughput(throughput, out)})",
        "",
        _conditions(payload),
        "",
        "### Idle cost per share member",
        "",
        "N idle members of one share group (topic with N partitions and no records) in one "
        "fresh process, each polled by its own thread with `poll(1.0)`, as `member_cost` does "
        "for the consumer; CPU (user + system, psutil) over a "
        f"{idle['window_s']:g} s window opened {idle['warmup_s']:g} s after the broker's "
        "ShareGroupDescribe showed every partition assigned. Per member = process CPU / N (an "
        "otherwise idle process uses no CPU, so no baseline is subtracted); RSS is per "
        "process. Implementations alternate per configuration.",
        "",
        "| N | implementation | CPU % core / member: median (min–max) | process CPU % | "
        "process RSS MB | threads | settle (s) | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in idle["member_counts"]:
        for impl in ("ours", "confluent"):
            stats = idle["stats"][f"{impl}/{n}"]
            cpu = stats["cpu_pct_per_member"]
            lines.append(
                f"| {n} | {impl} | {cpu['median']:.2f} ({cpu['min']:.2f}–{cpu['max']:.2f}) | "
                f"{stats['cpu_pct']['median']:.2f} | {stats['rss_mb']['median']:.0f} | "
                f"{stats['threads']['median']:.0f} | {stats['settle_s']['median']:.2f} | "
                f"{cpu['n']} |"
            )
    lines += [
        "",
        f"![share idle cost](benchmarks/{_plot_idle(idle, out)})",
        "",
        _conditions(payload),
        "",
    ]
    return lines
