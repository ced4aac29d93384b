"""The "Convergence" section of ``docs/benchmarks.md``, its plots and its rows of the targets
table, from ``convergence.json`` (``benchmarks.convergence``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.report_format import pyplot as _pyplot
from benchmarks.report_format import value_range as _range
from benchmarks.report_format import verdict as _verdict

__all__ = [
    "CONVERGENCE_AT_MOST_CONFLUENT",
    "CONVERGENCE_SLACK",
    "convergence_headline",
    "convergence_section",
]

#: Issue #17's convergence targets: the 10 x 900 cold join at most confluent's median, the
#: graceful leave as fast as librdkafka's, every other row within 5 % of confluent's median.
CONVERGENCE_AT_MOST_CONFLUENT = ("cold-join", "leave-3-2")
CONVERGENCE_SLACK = 1.05


def convergence_headline(payload: dict[str, Any]) -> list[str]:
    """The targets table's convergence rows: ours' median against confluent KIP-848's."""
    rows: list[str] = []
    for broker, data in payload["result"]["brokers"].items():
        for scenario, stats in data["stats"].items():
            ours = stats["ours"]["converge_s"]["median"]
            theirs = stats["confluent-848"]["converge_s"]["median"]
            strict = scenario in CONVERGENCE_AT_MOST_CONFLUENT
            bound = theirs if strict else theirs * CONVERGENCE_SLACK
            ok = ours <= bound
            gap = "" if ours <= theirs else f" (+{ours - theirs:.2f} s, x{ours / theirs:.2f})"
            target = "≤ confluent KIP-848 median" if strict else "≤ confluent KIP-848 median + 5 %"
            rows.append(
                f"| convergence {broker} {scenario} | {target} "
                f"({theirs:.2f} s) | {ours:.2f} s{gap} | {_verdict(ok)} |"
            )
    return rows


def _plot_timeline(broker: str, scenario: str, timelines: dict[str, Any], out: Path) -> str:
    plt = _pyplot()
    from benchmarks.convergence import LABELS
    from consumer.testing.plotting import Lane, Span, draw_lanes

    impls = [i for i in LABELS if i in timelines]
    fig, axes = plt.subplots(len(impls), 1, figsize=(9, 1.2 + 1.1 * len(impls)), squeeze=False)
    end = max((timelines[i]["end_s"] for i in impls), default=1.0) * 1.1 + 0.05
    for ax, impl in zip(axes[:, 0], impls, strict=True):
        lanes = timelines[impl]["lanes"]
        names = sorted(lanes, key=lambda n: int(n[1:]) if n[1:].isdigit() else 0)
        rows = []
        for name in names:
            steps = lanes[name]
            spans = [
                Span(start, steps[index + 1][0] if index + 1 < len(steps) else end, str(int(count)))
                for index, (start, count) in enumerate(steps)
                if count > 0
            ]
            rows.append(Lane(name, tuple(spans)))
        draw_lanes(ax, rows, label_min_width=end * 0.06)
        ax.axvline(0, color="black", lw=0.8)
        ax.axvline(timelines[impl]["end_s"], color="#c44e52", lw=1.0, ls="--")
        ax.set_xlim(-0.02 * end, end)
        ax.set_ylabel(LABELS[impl], rotation=0, ha="right", va="center", fontsize=8)
    axes[-1, 0].set_xlabel("seconds since the event (bars: partitions owned; dashed: converged)")
    fig.suptitle(f"{scenario} on the {broker} broker (first repetition)")
    fig.tight_layout()
    path = out / f"timeline-{broker}-{scenario}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path.name


def _plot_convergence_summary(result: dict[str, Any], out: Path) -> str:
    plt = _pyplot()
    from benchmarks.convergence import IMPLEMENTATIONS, SCENARIOS

    brokers = result["brokers"]
    fig, axes = plt.subplots(1, len(brokers), figsize=(7 * len(brokers), 4), squeeze=False)
    width = 0.8 / len(IMPLEMENTATIONS)
    for ax, (name, data) in zip(axes[0], brokers.items(), strict=True):
        for k, impl in enumerate(IMPLEMENTATIONS):
            med = [data["stats"][s][impl]["converge_s"]["median"] for s in SCENARIOS]
            ax.bar([x + k * width for x in range(len(SCENARIOS))], med, width, label=impl)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(SCENARIOS))], SCENARIOS, fontsize=8)
        ax.set_ylabel("seconds to converge (median)")
        ax.set_title(f"{name} broker")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "convergence.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path.name


def convergence_section(payload: dict[str, Any], out: Path) -> list[str]:
    """Section 2: every scenario, implementation and broker, with the timelines."""
    from benchmarks.convergence import IMPLEMENTATIONS, LABELS, SCENARIOS

    result = payload["result"]
    cold = result["cold_join"]
    lines = [
        "## 2. Convergence",
        "",
        "Each member runs in its own process. Scenarios: `join-1-2`, `join-2-3` (one member "
        "subscribes), `leave-3-2` (one member calls `close()`), `crash-3-2` (one member is "
        f"SIGKILLed), all on {result['chain_partitions']} partitions; `cold-join`: "
        f"{cold['members']} members subscribe at once to {cold['partitions']} partitions. "
        "Converged = every partition owned by exactly one live member (callback stamps), every "
        "live member owns something, ConsumerGroupDescribe says STABLE with the same members and "
        "assignment, and (ours) every member's state is STABLE. Time = latest callback (ours: "
        "latest STABLE transition) minus the event. *Max unowned* = the longest time any "
        "partition had no owner after the event. Before each event the harness waits a random "
        "fraction of a heartbeat interval so events do not always land at the same phase of the "
        "members' heartbeat cycles. Classic members use `heartbeat.interval.ms` = the broker's "
        "KIP-848 interval and `session.timeout.ms` = its KIP-848 session timeout; the broker's "
        "`group.initial.rebalance.delay.ms` is 0 and assignment batching is off "
        "(`group.consumer.assignment.interval.ms=0`). Targets (issue #17): the cold join and the "
        "graceful leave at most confluent-kafka KIP-848's median, every other scenario within "
        "5 % of it.",
        "",
        f"![convergence summary](benchmarks/{_plot_convergence_summary(result, out)})",
        "",
    ]
    for broker, data in result["brokers"].items():
        lines += [
            f"### Broker heartbeat interval {data['heartbeat_ms']} ms, session timeout "
            f"{data['session_ms']} ms ({broker}, {data.get('repeat', '?')} repetition(s))",
            "",
            "| scenario | implementation | median converge (s) | min–max | median max unowned (s) "
            "| min–max | ours / this | median last callback (s) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for scenario in SCENARIOS:
            stats = data["stats"][scenario]
            for impl in IMPLEMENTATIONS:
                conv, gap = stats[impl]["converge_s"], stats[impl]["max_unowned_s"]
                rel = "" if impl == "ours" else f"{stats['ratios'][f'ours/{impl}']:.2f}"
                cb = stats[impl].get("callbacks_s")
                cb_text = f"{cb['median']:.3f}" if cb and cb["n"] else "n/a"
                lines.append(
                    f"| {scenario} | {LABELS[impl]} | {conv['median']:.3f} | {_range(conv, 3)} | "
                    f"{gap['median']:.3f} | {_range(gap, 3)} | {rel} | {cb_text} |"
                )
        lines.append("")
        for scenario, timelines in data["timelines"].items():
            if timelines:
                name = _plot_timeline(broker, scenario, timelines, out)
                lines += [f"![{broker} {scenario}](benchmarks/{name})", ""]
    return lines
