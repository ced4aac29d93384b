"""Generate ``docs/benchmarks.md`` and ``docs/benchmarks/*.png`` from the result files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks import aio_throughput, metrics_ab
from benchmarks.ab_report import idle_ab_section, latency_ab_section, leave_section
from benchmarks.common import read_results
from benchmarks.delivery_latency import section as delivery_section
from benchmarks.scaling_report import scaling_section
from benchmarks.share_report import share_headline, share_section
from benchmarks.throughput_report import throughput_headline, throughput_section

MB_TARGET = 20.0
CPU_TARGET = 1.0
ACK_P99_TARGET_MS = 50.0


def _fmt(value: float, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def _range(stats: dict[str, Any], digits: int = 2, scale: float = 1.0) -> str:
    return f"{_fmt(stats['min'] * scale, digits)}–{_fmt(stats['max'] * scale, digits)}"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


# --- plots ------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def _plot_ack(result: dict[str, Any], out: Path) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for key, case in result["cases"].items():
        values = sorted(case["raw_total_ms"])
        if values:
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, ys, where="post", label=f"{key} member(s), n={len(values)}")
    ax.axvline(ACK_P99_TARGET_MS, color="#c44e52", ls="--", lw=1, label="p99 target 50 ms")
    ax.set_xlabel("ms from assignment response to ack heartbeat")
    ax.set_ylabel("cumulative fraction")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "ack_latency.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path.name


def _plot_cost(result: dict[str, Any], out: Path) -> str:
    plt = _pyplot()
    brokers = result["brokers"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, data in brokers.items():
        for impl, style in (("ours", "-o"), ("confluent-848", "--s")):
            counts = result["member_counts"]
            rss = [data["stats"][f"{impl}/{n}"]["rss_mb_per_member"]["median"] for n in counts]
            cpu = [data["stats"][f"{impl}/{n}"]["cpu_pct_per_member"]["median"] for n in counts]
            axes[0].plot(counts, rss, style, label=f"{impl} ({name})")
            axes[1].plot(counts, cpu, style, label=f"{impl} ({name})")
    axes[0].axhline(MB_TARGET, color="#c44e52", ls=":", lw=1)
    axes[1].axhline(CPU_TARGET, color="#c44e52", ls=":", lw=1)
    axes[0].set_ylabel("MB RSS per idle member")
    axes[1].set_ylabel("% of one core per idle member")
    for ax in axes:
        ax.set_xlabel("members in the process")
        ax.set_xscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "member_cost.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path.name


# --- markdown ---------------------------------------------------------------------------------


def _header(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "# Benchmarks: `consumer.Consumer` side by side with confluent-kafka",
        "",
        "_Generated by `python -m benchmarks` from `benchmarks/results/*.json`; do not edit by "
        "hand._ Every figure below comes from a real single-node Apache Kafka 4.3.1 broker on "
        "loopback started by `consumer.testing.real.broker.LocalBroker` (or the cluster named by "
        "`KAFKA_BOOTSTRAP_SERVERS`).",
        "",
        "## Conditions",
        "",
        "| benchmark | size | repeat | command | started | load average before → after |"
        " duration |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, payload in results.items():
        before = ", ".join(f"{x:.2f}" for x in payload["loadavg_before"])
        after = ", ".join(f"{x:.2f}" for x in payload["loadavg_after"])
        repeat = 1 if name == "member_cost" else payload["repeat"]  # one 20 s window per case
        lines.append(
            f"| {name} | {payload['size']} | {repeat} | `{payload['command']}` | "
            f"{payload['started_at']} | {before} → {after} | {payload['duration_s']:.0f} s |"
        )
    machine = next(iter(results.values()))["machine"]
    lines += [
        "",
        f"Machine: {machine.get('cpu_count')} CPU(s) ({machine.get('cpu_model')}), "
        f"{machine.get('memory_gb', '?')} GB RAM, {machine.get('platform')}, Python "
        f"{machine.get('python')}, confluent-kafka {machine.get('confluent_kafka')} / librdkafka "
        f"{machine.get('librdkafka')}. Library revision: {machine.get('git', 'unknown')}. "
        "The broker runs on the same machine.",
        "",
    ]
    sizes = {p["size"] for p in results.values()}
    if (machine.get("cpu_count") or 0) <= 2 or max(
        p["loadavg_before"][0] for p in results.values()
    ) > 1.0:
        lines += [
            "> **Caveat.** These figures were taken on a shared "
            f"{machine.get('cpu_count')}-core machine while other work (test suites of other "
            "engineers, the broker itself) competed for the CPUs; see the load averages above. "
            "Treat absolute numbers and small differences as noisy; the method and the order of "
            "magnitude are what these runs establish. Re-run `python -m benchmarks --size full` "
            "on a quiet machine for publishable numbers.",
            "",
        ]
    if "smoke" in sizes:
        lines += [
            "> **Smoke size.** At least one result file comes from `--size smoke` (tiny "
            "workloads that prove the harness works); its numbers say nothing about "
            "performance.",
            "",
        ]
    return lines


def _headline(results: dict[str, dict[str, Any]]) -> list[str]:
    rows: list[str] = []
    if "throughput" in results:
        rows += throughput_headline(results["throughput"])
    if "convergence" in results:
        for broker, data in results["convergence"]["result"]["brokers"].items():
            for scenario, stats in data["stats"].items():
                ours = stats["ours"]["converge_s"]["median"]
                theirs = stats["confluent-848"]["converge_s"]["median"]
                ok = ours <= theirs
                gap = "" if ok else f" (+{ours - theirs:.2f} s, x{ours / theirs:.2f})"
                rows.append(
                    f"| convergence {broker} {scenario} | ≤ confluent KIP-848 median "
                    f"({theirs:.2f} s) | {ours:.2f} s{gap} | {_verdict(ok)} |"
                )
    if "ack_latency" in results:
        for key, case in results["ack_latency"]["result"]["cases"].items():
            p99 = case["total_ms"]["p99"]
            ok = p99 <= ACK_P99_TARGET_MS
            gap = "" if ok else f" (+{p99 - ACK_P99_TARGET_MS:.1f} ms)"
            rows.append(
                f"| ack latency p99, {key} member(s) | ≤ {ACK_P99_TARGET_MS:.0f} ms | "
                f"{p99:.1f} ms{gap} (p50 {case['total_ms']['p50']:.1f} ms) | {_verdict(ok)} |"
            )
    if "member_cost" in results:
        cost = results["member_cost"]["result"]
        for broker, data in cost["brokers"].items():
            for n in cost["member_counts"]:
                stats = data["stats"][f"ours/{n}"]
                rss = stats["rss_mb_per_member"]["median"]
                cpu = stats["cpu_pct_per_member"]["median"]
                rows.append(
                    f"| idle member cost {broker}, N={n} | ≤ {MB_TARGET:.0f} MB and ≤ "
                    f"{CPU_TARGET:.0f} % core | {rss:.1f} MB, {cpu:.2f} % | "
                    f"{_verdict(rss <= MB_TARGET and cpu <= CPU_TARGET)} |"
                )
    if "share" in results:
        rows += share_headline(results["share"])
    if "aio_throughput" in results:
        rows += aio_throughput.headline(results["aio_throughput"])
    if not rows:
        return []
    return [
        "## Headline: targets",
        "",
        "| measure | target | result | verdict |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def _convergence(payload: dict[str, Any], out: Path) -> list[str]:
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
        "(`group.consumer.assignment.interval.ms=0`). Target: ours ≤ confluent-kafka KIP-848.",
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


def _ack(payload: dict[str, Any], out: Path) -> list[str]:
    result = payload["result"]
    lines = [
        "## 3. Ack latency",
        "",
        "From a heartbeat response carrying a new assignment to our acknowledging heartbeat "
        "(the next request carrying the owned partitions), measured by wrapping "
        "`GroupRequests.heartbeat` in the benchmark process (the library is not modified). "
        "*Total* includes the OffsetFetch round trip for new partitions and the hand-off to the "
        "application thread that runs `on_assign`/`on_revoke` inside `poll()`; *SDK* subtracts "
        "the OffsetFetch time. Assignments change as members join and as partitions are added "
        "to the topic step by step; members poll with `poll(0.1)` on their own threads, all in "
        "one process, 500 ms broker. Target: p99 ≤ 50 ms.",
        "",
        "| members | partitions (start + steps x added) | samples | total p50 / p99 (ms) | "
        "SDK p50 / p99 (ms) | max (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for key, case in result["cases"].items():
        total, sdk = case["total_ms"], case["sdk_ms"]
        lines.append(
            f"| {key} | {case['partitions']} + {case['growth_steps']} x "
            f"{case['growth_per_step']} | {case['samples']} | {total['p50']:.1f} / "
            f"{total['p99']:.1f} | {sdk['p50']:.1f} / {sdk['p99']:.1f} | {total['max']:.1f} |"
        )
    lines += ["", f"![ack latency](benchmarks/{_plot_ack(result, out)})", ""]
    return lines


def _cost(payload: dict[str, Any], out: Path) -> list[str]:
    result = payload["result"]
    lines = [
        "## 4. Cost per member",
        "",
        "N idle members (one partition each, no records: heartbeats only) in one fresh process, "
        "each polled by its own thread with `poll(1.0)`; RSS and CPU (user + system) measured "
        f"with psutil over a {result['window_s']:.0f} s window after the group settled. Per "
        "member = (process − a 0-member baseline process) / N; CPU in % of one core. "
        "confluent-kafka's KIP-848 consumer measured the same way for context. Targets (ours): "
        "≤ 20 MB and ≤ 1 % of a core per idle member.",
        "",
        "| broker | N | implementation | RSS MB / member | CPU % core / member | process RSS MB | "
        "process CPU % |",
        "|---|---|---|---|---|---|---|",
    ]
    for broker, data in result["brokers"].items():
        for n in result["member_counts"]:
            for impl in ("ours", "confluent-848"):
                stats = data["stats"][f"{impl}/{n}"]
                lines.append(
                    f"| {broker} | {n} | {impl} | {stats['rss_mb_per_member']['median']:.1f} | "
                    f"{stats['cpu_pct_per_member']['median']:.2f} | "
                    f"{stats['rss_mb']['median']:.0f} | {stats['cpu_pct']['median']:.1f} |"
                )
    lines += [
        "",
        f"![member cost](benchmarks/{_plot_cost(result, out)})",
        "",
        "### Core microbenchmark",
        "",
        "µs per `Member.handle(HeartbeatSucceeded(...))` + `Member.poll(now_ms)` for a STABLE "
        "member, manual clock, `time.perf_counter` around exactly those two calls, best of 5 "
        "rounds. There is no confluent-kafka equivalent: librdkafka's member is C code on its "
        "own threads, so this row has nothing to compare against.",
        "",
        "| owned partitions | µs per heartbeat (best) | median of rounds |",
        "|---|---|---|",
    ]
    for row in result["microbenchmark"]:
        lines.append(
            f"| {row['partitions']} | {row['us_per_heartbeat']:.1f} | {row['rounds_median']:.1f} |"
        )
    lines.append("")
    return lines


def _whatif(payload: dict[str, Any]) -> list[str]:
    ack = payload["result"]["ack_latency"]
    lines = [
        "### What-if experiment (`python -m benchmarks.whatif`)",
        "",
        "`poll()` as it is (long waits while the background promises quiet) against 10 ms "
        "slices throughout (as before; applied by monkeypatching in the benchmark process "
        f"only), interleaved ({payload['repeat']} repetitions of 1 member "
        f"x 20 growth steps; load average {payload['loadavg_before'][0]:.2f} at the start).",
        "",
        "| ack latency, 1 member | samples | p50 (ms) | p99 (ms) |",
        "|---|---|---|---|",
    ]
    for key, row in ack.items():
        lines.append(f"| {key} | {row['n']} | {row['p50']:.1f} | {row['p99']:.1f} |")
    cost = payload["result"].get("idle_cost")
    if cost:
        lines += [
            "",
            f"Their CPU, {cost['members']} idle members on the 500 ms broker "
            f"({cost['window_s']:.0f} s window):",
            "",
            "| slice | CPU % core / member | RSS MB / member |",
            "|---|---|---|",
        ]
        for key in ("as-is", "slices-10ms"):
            row = cost[key]
            lines.append(
                f"| {key} | {row['cpu_pct_per_member']:.2f} | {row['rss_mb_per_member']:.1f} |"
            )
    lines.append("")
    return lines


ANALYSIS_PATH = Path(__file__).with_name("analysis.md")


def write_report(results_dir: Path, docs_dir: Path) -> Path:
    """Write ``docs_dir/benchmarks.md`` and its plots; returns the markdown path."""
    results = read_results(results_dir)
    out = docs_dir / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    if not results:
        lines = ["# Benchmarks", "", "No results yet: run `python -m benchmarks`.", ""]
    else:
        lines += _header(results)
        lines += _headline(results)
        sections = {
            "throughput": throughput_section,
            "convergence": _convergence,
            "ack_latency": _ack,
            "delivery_latency": delivery_section,
            "member_cost": _cost,
            "share": share_section,
            "aio_throughput": aio_throughput.section,
            "metrics_ab": metrics_ab.section,
            "scaling": scaling_section,
            "leave": leave_section,
            "leave_5s": leave_section,
            "latency_ab": latency_ab_section,
            "idle_ab_500ms": lambda payload, out: idle_ab_section(
                payload, out, "500 ms heartbeats"
            ),
            "idle_ab_5s": lambda payload, out: idle_ab_section(payload, out, "5 s heartbeats"),
        }
        for name, section in sections.items():
            if name in results:
                lines += section(results[name], out)
        if ANALYSIS_PATH.exists():
            lines += [ANALYSIS_PATH.read_text().rstrip(), ""]
        if "whatif" in results:
            lines += _whatif(results["whatif"])
        lines += [
            "## Re-running",
            "",
            "```",
            "python -m benchmarks --size full            # everything, 3 repetitions",
            "python -m benchmarks throughput --repeat 5  # one benchmark",
            "python -m benchmarks share --size full      # share groups only (throughput, idle)",
            "KAFKA_BOOTSTRAP_SERVERS=host:9092 python -m benchmarks --size smoke",
            "```",
            "",
            "Raw results (every run) are in `benchmarks/results/*.json`.",
            "",
        ]
    path = docs_dir / "benchmarks.md"
    path.write_text("\n".join(lines))
    return path
