"""Idle cost per share member: CPU (and RSS) of N idle subscribed share members, ours vs
confluent-kafka's preview ``ShareConsumer``.

Measured as :mod:`benchmarks.member_cost` measures the consumer: each configuration runs in a
fresh child process (``benchmarks._share_cost_proc``, from the share fork server) holding N
members of one share group on a topic with N partitions and no records, each member polled by
its own thread with ``poll(1.0)``; CPU (user + system, psutil) over a fixed window that opens
once the broker's ShareGroupDescribe shows every partition assigned, plus a warm-up. Per
member = process CPU / N (an idle process that only sleeps in its main thread uses no CPU, so
no baseline is subtracted; RSS is reported per process). The implementations alternate per
configuration.
"""

from __future__ import annotations

import uuid
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from benchmarks._share_cost_proc import cost_main
from benchmarks._share_proc import member_processes
from benchmarks.common import create_topic, log, set_share_group_configs, summary

IMPLEMENTATIONS = ("ours", "confluent")


def _spec(bootstrap: str, impl: str, members: int, warmup_s: float, window_s: float) -> Any:
    topic = f"bench-share-cost-{members}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, members)
    group = f"bench-share-cost-{uuid.uuid4().hex[:8]}"
    set_share_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    return {
        "impl": impl,
        "members": members,
        "bootstrap": bootstrap,
        "topic": topic,
        "group": group,
        "warmup_s": warmup_s,
        "window_s": window_s,
    }


def measure_all(specs: list[dict[str, Any]], concurrently: bool) -> list[dict[str, Any]]:
    """One child process per spec, one after the other (or all at once: smoke size only)."""
    context = member_processes()

    def start(spec: dict[str, Any]) -> tuple[BaseProcess, Connection]:
        pipe, child_end = context.Pipe()
        child = context.Process(target=cost_main, args=(spec, child_end), daemon=True)
        child.start()
        child_end.close()
        return child, pipe

    def finish(spec: dict[str, Any], started: tuple[BaseProcess, Connection]) -> dict[str, Any]:
        child, pipe = started
        try:
            if not pipe.poll(300 + int(spec["members"]) * 5):
                raise TimeoutError(f"share cost child ({spec['impl']}, {spec['members']}) hung")
            answer = pipe.recv()
        finally:
            child.join(30)
            if child.is_alive():
                child.kill()
        if "error" in answer:
            raise RuntimeError(
                f"share cost child failed ({spec['impl']}, {spec['members']}):\n{answer['error']}"
            )
        row: dict[str, Any] = answer["ok"]
        row["cpu_pct_per_member"] = row["cpu_pct"] / max(1, int(spec["members"]))
        return row

    if concurrently:
        children = [(spec, start(spec)) for spec in specs]
        return [finish(spec, child) for spec, child in children]
    return [finish(spec, start(spec)) for spec in specs]


def run(bootstrap: str, size: str, repeat: int) -> dict[str, Any]:
    """Idle cost of 1 and 10 share members (1 at smoke size); returns JSON-ready results."""
    counts = (1, 10) if size == "full" else (1,)
    warmup_s, window_s = (5.0, 20.0) if size == "full" else (0.2, 1.0)
    rows: list[dict[str, Any]] = []
    for rep in range(repeat):
        for n in counts:
            order = IMPLEMENTATIONS if rep % 2 == 0 else IMPLEMENTATIONS[::-1]
            specs = [_spec(bootstrap, impl, n, warmup_s, window_s) for impl in order]
            for row in measure_all(specs, concurrently=size != "full"):
                row["repetition"] = rep
                rows.append(row)
                log(
                    f"share idle cost {row['impl']} N={n}: {row['cpu_pct_per_member']:.2f} % "
                    f"core per member ({row['rss_mb']:.0f} MB process RSS)"
                )
    stats: dict[str, Any] = {}
    for n in counts:
        for impl in IMPLEMENTATIONS:
            mine = [r for r in rows if r["members"] == n and r["impl"] == impl]
            stats[f"{impl}/{n}"] = {
                "cpu_pct_per_member": summary([r["cpu_pct_per_member"] for r in mine]),
                "cpu_pct": summary([r["cpu_pct"] for r in mine]),
                "rss_mb": summary([r["rss_mb"] for r in mine]),
                "threads": summary([r["threads"] for r in mine]),
                "settle_s": summary([r["settle_s"] for r in mine]),
            }
    return {
        "member_counts": list(counts),
        "window_s": window_s,
        "warmup_s": warmup_s,
        "concurrent_children": size != "full",
        "runs": rows,
        "stats": stats,
    }
