"""Share-group throughput: our ``consumer.ShareConsumer`` vs confluent-kafka's preview
``confluent_kafka.ShareConsumer``, in the same run, interleaved.

Cases: implicit acknowledgement and explicit acknowledgement (``acknowledge(message)``, ACCEPT,
for every record), 100 B and 1 KiB values, 1 and 4 members. Every member runs in its own process
(``benchmarks._share_proc``, forked from a server that imported both libraries once), also when
there is only one: that is how share groups are deployed (several processes reading one topic),
and it keeps the GIL of one process from deciding a 4-member result (our share consumer is
pure Python; librdkafka fetches on C threads).

Each run uses a fresh share group whose ``share.auto.offset.reset`` is set to ``earliest``
(IncrementalAlterConfigs on the GROUP resource) before any member subscribes; the members are
built, then all told to subscribe at once. Rate = records first delivered (``delivery_count() ==
1``) / time from the first non-empty ``poll`` of any member to the last record handled by any
member; the run stops when the members together have every record of the pre-produced topic.
Join time is reported separately (``first_record_s``). Implementations alternate (ours,
confluent, ours, ... the order rotating per repetition) so machine load hits both alike.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from benchmarks._share_proc import member_main, member_processes
from benchmarks.common import (
    end_offsets,
    log,
    ratio,
    set_share_group_configs,
    summary,
)
from benchmarks.throughput import PARTITIONS, Workload, ensure_topic

IMPLEMENTATIONS = ("ours", "confluent")
LABELS = {
    "ours": "ours (consumer.ShareConsumer)",
    "confluent": "confluent-kafka ShareConsumer (preview)",
}
GROUP_CONFIGS = {"share.auto.offset.reset": "earliest"}
READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Case:
    """One configuration: a workload, an acknowledgement mode and a member count."""

    work: Workload
    mode: str
    members: int

    @property
    def key(self) -> str:
        return f"{self.work.label}/{self.mode}/{self.members}"


def cases(size: str) -> list[Case]:
    """Every case of ``size``: all eight at full size; at smoke size one case that exercises
    the most (explicit acks, several member processes) and stays fast."""
    if size == "full":
        loads = [Workload("100B", 200_000, 100), Workload("1KiB", 100_000, 1024)]
        return [
            Case(work, mode, members)
            for work in loads
            for mode in ("implicit", "explicit")
            for members in (1, 4)
        ]
    return [Case(Workload("100B", 2_000, 100), "explicit", 2)]


class _Child:
    """One member process (from the fork server) and a thread forwarding its events."""

    def __init__(self, spec: dict[str, Any], events: queue.Queue[tuple[int, dict[str, Any]]]):
        self.index = int(spec["index"])
        context = member_processes()
        self.pipe, child_end = context.Pipe()
        self.process = context.Process(target=member_main, args=(spec, child_end), daemon=True)
        self.process.start()
        child_end.close()
        threading.Thread(target=self._forward, args=(events,), daemon=True).start()

    def _forward(self, events: queue.Queue[tuple[int, dict[str, Any]]]) -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                events.put((self.index, self.pipe.recv()))
        events.put((self.index, {"ev": "exit", "code": self.process.exitcode}))

    def send(self, command: str) -> None:
        with contextlib.suppress(OSError):
            self.pipe.send(command)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(10)


def _collect(
    events: queue.Queue[tuple[int, dict[str, Any]]],
    children: list[_Child],
    wanted: str,
    timeout_s: float,
) -> dict[int, dict[str, Any]]:
    """Wait for event ``wanted`` from every child; RuntimeError naming a child that exited."""
    found: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout_s
    while len(found) < len(children):
        try:
            index, event = events.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(
                f"no {wanted!r} from every member within {timeout_s:.0f} s"
            ) from None
        if event["ev"] == wanted:
            found[index] = event
        elif event["ev"] == "exit" and index not in found:
            raise RuntimeError(f"member {index} exited before {wanted!r} (see its stderr)")
    return found


def run_once(impl: str, bootstrap: str, topic: str, case: Case) -> dict[str, Any]:
    """One run of ``impl`` on ``case``: fresh group, members in their own processes."""
    total = case.work.count
    group = f"bench-share-{uuid.uuid4().hex[:10]}"
    set_share_group_configs(bootstrap, group, GROUP_CONFIGS)
    events: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
    base = {"impl": impl, "bootstrap": bootstrap, "group": group, "topic": topic}
    children = [
        _Child({**base, "mode": case.mode, "index": index}, events) for index in range(case.members)
    ]
    try:
        _collect(events, children, "ready", READY_TIMEOUT_S)
        go = time.monotonic()
        for child in children:
            child.send("go")
        progress = dict.fromkeys(range(case.members), 0)
        deadline = go + max(60.0, total / 1_000)
        while sum(progress.values()) < total and time.monotonic() < deadline:
            try:
                index, event = events.get(timeout=0.5)
            except queue.Empty:
                continue
            if event["ev"] == "progress":
                progress[index] = int(event["n"])
            elif event["ev"] == "exit":
                raise RuntimeError(f"member {index} of {impl} exited early (see its stderr)")
        for child in children:
            child.send("stop")
        done = _collect(events, children, "done", 60.0)
        for child in children:
            child.process.join(30)
    finally:
        for child in children:
            child.kill()
    return _outcome(impl, case, go, done)


def _outcome(impl: str, case: Case, go: float, done: dict[int, dict[str, Any]]) -> dict[str, Any]:
    members = [done[i] for i in sorted(done)]
    firsts = [m["first"] for m in members if m["first"] is not None]
    lasts = [m["last"] for m in members if m["last"] is not None]
    consumed = sum(int(m["n"]) for m in members)
    per_partition: dict[str, int] = {}
    for member in members:
        for partition, count in member["per_partition"].items():
            per_partition[str(partition)] = per_partition.get(str(partition), 0) + int(count)
    seconds = (max(lasts) - min(firsts)) if firsts and lasts else 0.0
    rate = ratio(consumed, seconds)
    return {
        "impl": impl,
        "members": case.members,
        "mode": case.mode,
        "consumed": consumed,
        "expected": case.work.count,
        "redelivered": sum(int(m["redelivered"]) for m in members),
        "per_partition": per_partition,
        "member_records": [int(m["n"]) for m in members],
        "batches": sum(int(m["batches"]) for m in members),
        "records_per_s": rate,
        "mb_per_s": rate * case.work.size / 1e6,
        "first_record_s": (min(firsts) - go) if firsts else None,
        "timed_s": seconds,
    }


def _case_stats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    stats = {
        impl: summary([r["records_per_s"] for r in runs if r["impl"] == impl])
        for impl in IMPLEMENTATIONS
    }
    reps = sorted({r["repetition"] for r in runs})
    by = {(r["impl"], r["repetition"]): r["records_per_s"] for r in runs}
    paired = [ratio(by[("ours", k)], by[("confluent", k)]) for k in reps]
    return {
        "stats": stats,
        "ratio": summary(paired),  # ours / confluent per repetition (interleaved pairs)
        "ratio_of_medians": ratio(
            float(stats["ours"]["median"]), float(stats["confluent"]["median"])
        ),
        "first_record_s": {
            impl: summary([r["first_record_s"] for r in runs if r["impl"] == impl])
            for impl in IMPLEMENTATIONS
        },
    }


def run(bootstrap: str, size: str, repeat: int) -> dict[str, Any]:
    """The whole share throughput benchmark; returns the JSON-ready result."""
    result: dict[str, Any] = {"partitions": PARTITIONS, "process_per_member": True, "cases": {}}
    for case in cases(size):
        topic = ensure_topic(bootstrap, case.work)
        ends = end_offsets(bootstrap, topic, PARTITIONS)
        runs: list[dict[str, Any]] = []
        for rep in range(repeat):
            order = IMPLEMENTATIONS if rep % 2 == 0 else IMPLEMENTATIONS[::-1]
            for impl in order:
                outcome = run_once(impl, bootstrap, topic, case)
                outcome["repetition"] = rep
                outcome["complete"] = outcome["per_partition"] == {
                    str(p): n for p, n in ends.items() if n
                }
                runs.append(outcome)
                log(
                    f"share throughput {case.key} {impl}: {outcome['records_per_s']:,.0f} rec/s "
                    f"({outcome['consumed']}/{case.work.count}, "
                    f"{outcome['redelivered']} redelivered)"
                )
        result["cases"][case.key] = {
            "workload": case.work.label,
            "mode": case.mode,
            "members": case.members,
            "topic": topic,
            "count": case.work.count,
            "size": case.work.size,
            "runs": runs,
            **_case_stats(runs),
        }
    return result
