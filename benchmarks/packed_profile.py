"""Where the CPU of an assignment change goes when many members share one process.

``python -m benchmarks.packed_profile --bootstrap HOST:PORT [--members 50] [--partitions 900]
[--steps 3] [--grow 50] [--yappi]`` runs ``--members`` members of ours in this process (one
``poll(0.1)`` thread each, as ``benchmarks._group_proc``) on a fresh ``--partitions``-partition
topic (warmed first, see ``warm_topic_for_groups``): the cold join (every member subscribes,
until every member is STABLE and the group owns every partition), then ``--steps`` growth steps
of ``--grow`` partitions each (a new target assignment for every member).

For each phase it prints the wall time, the process's CPU split into the members' background
threads and the rest (``/proc/self/task``), i.e. CPU per member per change. With ``--yappi``
(the ``yappi`` package must be importable; it is not a dependency of the project) every thread
is profiled with yappi's CPU clock and the top functions are printed by own time and by
cumulative time, both per member, per phase; profiling slows every thread, so the wall times of
a ``--yappi`` run are not comparable with a run without it.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable

from confluent_kafka.cimpl import NewPartitions

from benchmarks.common import admin_client, create_topic, wait_for, warm_topic_for_groups
from consumer import Consumer

_BACKGROUND_THREAD = "kafka-group-member"
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds so far of this process's threads, summed by kind (background / other)."""
    background = {t.native_id for t in threading.enumerate() if t.name == _BACKGROUND_THREAD}
    totals = {"background": 0.0, "other": 0.0}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                text = stat.read()
        except OSError:  # the thread ended meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS_PER_S  # utime + stime
        totals["background" if int(task) in background else "other"] += cpu
    return totals


def _settled(consumers: list[Consumer], partitions: int) -> bool:
    owned = 0
    for member in consumers:
        if member.state != "STABLE":
            return False
        owned += len(member.assignment())
    return owned == partitions


class _Profiler:
    """yappi over every thread (or nothing), reported per phase."""

    def __init__(self, enabled: bool, members: int, top: int) -> None:
        self.enabled = enabled
        self.members = members
        self.top = top
        if enabled:
            import yappi

            yappi.set_clock_type("cpu")

    def start(self) -> None:
        if self.enabled:
            import yappi

            yappi.clear_stats()
            yappi.start()

    def report(self, phase: str) -> None:
        if not self.enabled:
            return
        import yappi

        yappi.stop()
        stats = yappi.get_func_stats()
        rows = [
            (s.tsub, s.ttot, s.ncall, f"{s.module.split('/')[-1]}:{s.lineno} {s.name}")
            for s in stats
        ]
        for label, key in (("own", 0), ("cumulative", 1)):
            print(f"  {phase}: top by {label} time, ms per member")
            for row in sorted(rows, key=lambda r: r[key], reverse=True)[: self.top]:
                own_ms, total_ms = row[0] * 1000 / self.members, row[1] * 1000 / self.members
                print(f"    own {own_ms:8.2f} cum {total_ms:8.2f} calls {row[2]:7d}  {row[3]}")


def _phase(
    name: str, members: int, profiler: _Profiler, body: Callable[[], None]
) -> dict[str, float]:
    before, process_before = thread_cpu_s(), time.process_time()
    profiler.start()
    started = time.monotonic()
    body()
    wall_s = time.monotonic() - started
    profiler.report(name)
    after, process_s = thread_cpu_s(), time.process_time() - process_before
    background = after["background"] - before["background"]
    other = after["other"] - before["other"]
    print(
        f"{name}: wall {wall_s:.2f} s, process CPU {process_s:.2f} s"
        f" = {1000 * process_s / members:.1f} ms per member (threads, 10 ms ticks: background"
        f" {background:.2f} s, other {other:.2f} s; load {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    return {"wall_s": wall_s, "process_s": process_s, "background_s": background}


def run(args: argparse.Namespace) -> None:
    """The cold join and the growth steps, each measured."""
    topic = f"bench-packed-{uuid.uuid4().hex[:8]}"
    create_topic(args.bootstrap, topic, args.partitions)
    warm_topic_for_groups(args.bootstrap, topic, args.partitions)
    admin = admin_client(args.bootstrap)
    profiler = _Profiler(args.yappi, args.members, args.top)
    group = f"bench-packed-{uuid.uuid4().hex[:8]}"
    consumers = [
        Consumer({"bootstrap.servers": args.bootstrap, "group.id": group})
        for _ in range(args.members)
    ]
    stop = threading.Event()

    def poll(member: Consumer) -> None:
        while not stop.is_set():
            member.poll(0.1)

    threads = [threading.Thread(target=poll, args=(c,), daemon=True) for c in consumers]
    timeout_s = 120.0

    def cold_join() -> None:
        for member in consumers:
            member.subscribe([topic])
        for thread in threads:
            thread.start()
        try:
            wait_for(lambda: _settled(consumers, args.partitions), timeout_s, "the cold join")
        except TimeoutError:
            states = Counter(member.state for member in consumers)
            owned = sum(len(member.assignment()) for member in consumers)
            print(f"cold join not settled: states {dict(states)}, {owned} partitions owned")
            raise

    try:
        _phase("cold join", args.members, profiler, cold_join)
        time.sleep(1.0)
        _phase("idle 1 s (no change)", args.members, profiler, lambda: time.sleep(1.0))
        total = args.partitions
        for step in range(args.steps):
            time.sleep(1.0)  # quiet between phases, so that each phase's CPU is its own
            total += args.grow

            def grow(n: int = total) -> None:
                admin.create_partitions([NewPartitions(topic, n)])[topic].result(30)
                wait_for(lambda: _settled(consumers, n), timeout_s, f"{n} partitions owned")

            _phase(f"growth step {step + 1}", args.members, profiler, grow)
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        closers = [threading.Thread(target=c.close, daemon=True) for c in consumers]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(30)


def main() -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.packed_profile")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=900)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--grow", type=int, default=50)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--yappi", action="store_true")
    args = parser.parse_args()
    if not args.bootstrap:
        parser.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
