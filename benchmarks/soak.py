"""``python -m benchmarks.soak [--duration-s 3600]``: churn on a local three-broker cluster for a
long time while the resident memory, open file descriptors and threads of long-lived member
processes are sampled; they must stay flat.

Three long-lived members (our KIP-848 ``Consumer``, ``benchmarks._soak_member``: consume,
commit each batch, keep nothing per record) consume a replicated topic (8 partitions, RF 3,
``min.insync.replicas=2``) fed at a steady rate (``acks=all``, idempotent). Around them, every
``--churn-s`` seconds one fault from a fixed cycle hits the group or the cluster: a fourth member
killed and started again, the same one leaving and joining, a broker shut down and restarted,
the coordinator's broker killed and restarted. Each fault makes the long-lived members rebalance,
reconnect or find a new coordinator, which is where a leak would show.

Every ``--sample-s`` seconds each long-lived member's RSS, open fds and threads are read from
/proc (psutil) into a CSV; at the end a PNG plots them and a JSON holds the verdict: RSS growth
after the warm-up (median of the first minute after it against the median of the last minute;
the aim is < 5 %) and the spread of fds and threads after it. Writes to ``--out-dir`` (default
``benchmarks/results/soak``) and the plot also to ``docs/benchmarks/soak.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.common import REPO_ROOT
from consumer.testing.real.cluster import LocalCluster

FAULT_CYCLE = ("member_kill", "member_leave", "broker_stop", "member_kill", "coordinator_kill")
PARTITIONS = 8
LONG_LIVED = ("L1", "L2", "L3")
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "soak"
DOCS_PLOT = REPO_ROOT / "docs" / "benchmarks" / "soak.png"
#: Samples in "one minute" at the ends of the post-warm-up window, at the default sample period.
_EDGE_S = 60.0


class MemberProc:
    """One ``benchmarks._soak_member`` process."""

    def __init__(self, name: str, spec: dict[str, Any], workdir: Path) -> None:
        self.name = name
        self.counts = workdir / f"{name}.counts.json"
        self.stderr = workdir / f"{name}.stderr"
        with open(self.stderr, "wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks._soak_member",
                    json.dumps({**spec, "counts": str(self.counts)}),
                ],
                cwd=REPO_ROOT,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.ps = psutil.Process(self.process.pid)

    def sample(self) -> tuple[int, int, int] | None:
        """(RSS KiB, open fds, threads), or None if the process is gone."""
        try:
            with self.ps.oneshot():
                return self.ps.memory_info().rss // 1024, self.ps.num_fds(), self.ps.num_threads()
        except psutil.Error:
            return None

    def processed(self) -> int:
        try:
            return int(json.loads(self.counts.read_text())["processed"])
        except (OSError, ValueError, KeyError):
            return 0

    def leave(self, timeout_s: float = 60.0) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


class SteadyFeed(threading.Thread):
    """Numbered records at ``rate`` per second until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(name="soak-feed", daemon=True)
        self.topic, self.rate = topic, rate
        self.stopping = threading.Event()
        self.sent = 0
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 20, "message.timeout.ms": 300_000}
        )  # fmt: skip

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                self.producer.produce(self.topic, str(self.sent).encode())
                self.sent += 1
            self.producer.poll(0)
            self.stopping.wait(0.1)  # pacing of the workload
        self.producer.flush(120)


def sampler(members: Sequence[MemberProc], rows: list[list[Any]], out: Path, every_s: float,
            stopping: threading.Event, started: float) -> None:  # fmt: skip
    """Append one row per long-lived member every ``every_s`` seconds to ``rows`` and ``out``."""
    with open(out, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["t_s", "member", "rss_kib", "fds", "threads"])
        while not stopping.is_set():
            t = round(time.monotonic() - started, 1)
            for member in members:
                got = member.sample()
                if got is not None:
                    row = [t, member.name, *got]
                    rows.append(row)
                    writer.writerow(row)
            stream.flush()
            stopping.wait(every_s)  # the sampling period


def verdict(rows: list[list[Any]], warmup_s: float) -> dict[str, Any]:
    """Per member: RSS growth after the warm-up, fds and threads range after it."""
    result: dict[str, Any] = {}
    for name in LONG_LIVED:
        after = [r for r in rows if r[1] == name and r[0] >= warmup_s]
        if len(after) < 4:
            result[name] = {"error": "too few samples after the warm-up"}
            continue
        first = [r[2] for r in after if r[0] <= after[0][0] + _EDGE_S]
        last = [r[2] for r in after if r[0] >= after[-1][0] - _EDGE_S]
        start_kib, end_kib = statistics.median(first), statistics.median(last)
        result[name] = {
            "rss_mib_after_warmup": round(start_kib / 1024, 1),
            "rss_mib_at_end": round(end_kib / 1024, 1),
            "rss_growth_pct": round(100 * (end_kib - start_kib) / start_kib, 2),
            "rss_mib_max": round(max(r[2] for r in after) / 1024, 1),
            "fds_min_max": [min(r[3] for r in after), max(r[3] for r in after)],
            "threads_min_max": [min(r[4] for r in after), max(r[4] for r in after)],
        }
    return result


def plot(rows: list[list[Any]], warmup_s: float, title: str, paths: Sequence[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    for name in LONG_LIVED:
        mine = [r for r in rows if r[1] == name]
        minutes = [r[0] / 60 for r in mine]
        axes[0].plot(minutes, [r[2] / 1024 for r in mine], label=name)
        axes[1].plot(minutes, [r[3] for r in mine], label=name)
        axes[2].plot(minutes, [r[4] for r in mine], label=name)
    for axis, label in zip(axes, ("RSS (MiB)", "open fds", "threads"), strict=True):
        axis.axvline(warmup_s / 60, color="grey", linestyle="--", linewidth=1)
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    axes[0].set_title(title)
    axes[2].set_xlabel("minutes (dashed: end of warm-up)")
    fig.tight_layout()
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
    plt.close(fig)


def run(args: argparse.Namespace) -> dict[str, Any]:
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kgm-soak-"))  # members' counts and stderr
    stem = f"soak-{int(args.duration_s)}s"
    with LocalCluster(brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic, group = f"soak-{uuid.uuid4().hex[:8]}", f"soak-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
        feed = SteadyFeed(cluster.bootstrap_servers, topic, args.rate)
        feed.start()
        spec = {"bootstrap": cluster.bootstrap_servers, "group": group, "topic": topic}
        long_lived = [MemberProc(name, spec, workdir) for name in LONG_LIVED]
        churner = MemberProc("C.1", spec, workdir)
        rows: list[list[Any]] = []
        stopping = threading.Event()
        started = time.monotonic()
        sampling = threading.Thread(
            target=sampler,
            args=(long_lived, rows, out_dir / f"{stem}.csv", args.sample_s, stopping, started),
            daemon=True,
        )
        sampling.start()
        faults: Counter[str] = Counter()
        incarnation = 1
        try:
            while time.monotonic() - started < args.duration_s:
                time.sleep(args.churn_s)  # the pace of the churn
                kind = FAULT_CYCLE[sum(faults.values()) % len(FAULT_CYCLE)]
                if kind in ("member_kill", "member_leave"):
                    churner.kill() if kind == "member_kill" else churner.leave()
                    incarnation += 1
                    churner = MemberProc(f"C.{incarnation}", spec, workdir)
                else:
                    node = (
                        cluster.coordinator_of(group)
                        if kind == "coordinator_kill"
                        else 1 + sum(faults.values()) % 3
                    )
                    cluster.kill(node) if kind == "coordinator_kill" else cluster.stop(node)
                    cluster.restart(node)
                faults[kind] += 1
                dead = [m.name for m in long_lived if m.process.poll() is not None]
                if dead:
                    raise RuntimeError(f"long-lived members died: {dead}")
        finally:
            stopping.set()
            sampling.join(30)
            feed.stopping.set()
            feed.join(180)
            processed = {m.name: m.processed() for m in long_lived}
            for member in (*long_lived, churner):
                if member.process.poll() is None:
                    member.leave()
    took_s = time.monotonic() - started
    summary: dict[str, Any] = {
        "workdir": str(workdir),
        "duration_s": round(took_s),
        "warmup_s": args.warmup_s,
        "sample_s": args.sample_s,
        "churn_s": args.churn_s,
        "faults": dict(faults),
        "records_produced": feed.sent,
        "processed_by_long_lived": processed,
        "members": verdict(rows, args.warmup_s),
        "loadavg": os.getloadavg(),
    }
    growth = [m.get("rss_growth_pct", float("inf")) for m in summary["members"].values()]
    summary["rss_growth_below_5_pct"] = all(g < 5 for g in growth)
    title = (
        f"soak: {round(took_s / 60)} min of churn on a 3-broker cluster, "
        f"{sum(faults.values())} faults; long-lived members"
    )
    plot(rows, args.warmup_s, title, [out_dir / f"{stem}.png", args.plot])
    (out_dir / f"{stem}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; print the summary; exit 1 if RSS grew by 5 % or more."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__)
    parser.add_argument("--duration-s", type=float, default=3600.0)
    parser.add_argument("--warmup-s", type=float, default=None,
                        help="default: a sixth of the duration, at most 600 s")  # fmt: skip
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--churn-s", type=float, default=20.0, help="seconds between faults")
    parser.add_argument("--rate", type=int, default=200, help="records produced per second")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, default=DOCS_PLOT)
    args = parser.parse_args(argv)
    if args.warmup_s is None:
        args.warmup_s = min(600.0, args.duration_s / 6)
    summary = run(args)
    print(json.dumps(summary, indent=2))  # noqa: T201 - the command's output
    return 0 if summary["rss_growth_below_5_pct"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
