"""Many members in one process: this tree against a baseline tree, alternating.

``python -m benchmarks.scaling_ab --baseline-tree DIR --bootstrap HOST:PORT [--repeat 3]
[--members 25] [--partitions 900] [--ack-members 50]`` runs, per repetition and tree (the order
alternates), two cases, each in a fresh child process whose ``PYTHONPATH`` is that tree:

* **packed group**: ``--members`` members in one process, one polling thread each
  (``poll(0.1)`` in a loop, as ``benchmarks._group_proc``), on a ``--partitions``-partition
  topic created once before the first repetition (a topic created seconds before a group reads
  it is assigned late by the broker, which would measure the broker): the cold join (every
  member subscribes; until every member is STABLE, owns something and the group owns every
  partition), one more member joining, and then the process's CPU over a 10 s steady window,
  split into the members' background threads and everything else (``/proc/self/task``);
* **ack latency**: ``benchmarks.ack_latency.run_case`` with ``--ack-members`` members
  (``[total_ms, sdk_ms]`` per new assignment; ``--ack-members 0`` skips it).

``--confluent`` adds confluent-kafka's KIP-848 consumer to the packed case (same topic, same
polling threads, run after the two trees in each repetition): the gap left. Its members have no
published state, so it converges when every member's ``assignment()`` is non-empty and they add
up to every partition (ours must also be STABLE: it is at the ack's answer). What a member owns
comes from its rebalance callbacks, for both: confluent-kafka serialises calls on a handle, so
``assignment()`` from the harness's thread would wait behind the member's ``poll()`` loop.

Prints the summaries and writes ``benchmarks/results/scaling_ab.json`` (``--name`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    REPO_ROOT,
    create_topic,
    log,
    machine_facts,
    percentile,
    wait_for,
    warm_topic_for_groups,
    write_result,
)

#: The background threads' name (``consumer._runtime.background``).
_BACKGROUND_THREAD = "kafka-group-member"
_STEADY_WINDOW_S = 10.0
_ACK = (
    "import json, sys; from benchmarks import ack_latency as a; n = int(sys.argv[2]); "
    "print(json.dumps([list(s) for s in a.run_case(sys.argv[1], n, 2 * n, 10, n)]))"
)


def _thread_cpu_s() -> dict[str, float]:
    """CPU seconds so far of this process's threads: background ones and the rest."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    ticks = os.sysconf("SC_CLK_TCK")
    totals = {"background": 0.0, "other": 0.0}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        kind = "background" if names.get(int(task)) == _BACKGROUND_THREAD else "other"
        totals[kind] += (int(fields[11]) + int(fields[12])) / ticks
    return totals


def packed_group(
    bootstrap: str, topic: str, partitions: int, members: int, impl: str = "ours"
) -> dict[str, Any]:
    """The packed-group case, in this process (see the module docstring)."""
    import consumer

    group = f"bench-packed-{uuid.uuid4().hex[:8]}"

    def new_member() -> Any:
        config = {"bootstrap.servers": bootstrap, "group.id": group}
        if impl == "ours":
            return consumer.Consumer(config)
        from confluent_kafka import Consumer as ConfluentConsumer

        return ConfluentConsumer({**config, "group.protocol": "consumer"})

    consumers = [new_member() for _ in range(members)]
    stop = threading.Event()

    def loop(member: Any) -> None:
        while not stop.is_set():
            member.poll(0.1)

    # What each member owns, from its own rebalance callbacks (run by its polling thread):
    # confluent-kafka 2.16 serialises calls on one handle, so ``assignment()`` from this thread
    # waits behind a ``poll()`` loop that never pauses, and a wait on it never ends.
    owned_by: dict[int, set[tuple[str, int]]] = {}

    def settled(group_members: list[Any]) -> bool:
        owned = 0
        for member in group_members:
            if impl == "ours" and member.state != "STABLE":
                return False
            assigned = len(owned_by[id(member)])
            if not assigned:
                return False
            owned += assigned
        return owned == partitions

    def describe(group_members: list[Any]) -> str:
        return ", ".join(
            f"{getattr(m, 'state', '?')}/{len(owned_by[id(m)])}" for m in group_members
        )

    def converge(group_members: list[Any], what: str) -> float:
        started = time.monotonic()
        try:
            wait_for(lambda: settled(group_members), 120, what, step_s=0.01)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; state/owned per member: {describe(group_members)}") from exc
        return time.monotonic() - started

    def start(member: Any) -> None:
        owned = owned_by.setdefault(id(member), set())

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            owned.update((tp.topic, tp.partition) for tp in partitions)

        def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
            owned.difference_update((tp.topic, tp.partition) for tp in partitions)

        member.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        threading.Thread(target=loop, args=(member,), daemon=True).start()

    result: dict[str, Any] = {"consumer_package": str(Path(consumer.__file__).parent)}
    try:
        for member in consumers:
            start(member)
        result["cold_join_s"] = converge(consumers, "the cold join to converge")
        joiner = new_member()
        consumers.append(joiner)
        start(joiner)
        result["join_s"] = converge(consumers, "the join to converge")
        before = _thread_cpu_s()
        time.sleep(_STEADY_WINDOW_S)  # the measuring window itself, not a synchronisation
        after = _thread_cpu_s()
        result["steady_cpu_pct"] = {
            kind: 100 * (after[kind] - before[kind]) / _STEADY_WINDOW_S for kind in before
        }
    finally:
        stop.set()
        closers = [threading.Thread(target=c.close, daemon=True) for c in consumers]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(30)
    return result


def _child(root: Path, args: list[str]) -> Any:
    """The child's last stdout line as JSON, or ``{"failed": its stderr's tail}``."""
    out = subprocess.run(
        [sys.executable, *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        return {"failed": out.stderr.strip()[-1500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _packed_args(
    bootstrap: str, topic: str, partitions: int, members: int, impl: str = "ours"
) -> list[str]:
    # This file, run by path: the baseline tree may not have it, but its imports (consumer,
    # benchmarks.common) come from the child's PYTHONPATH, i.e. from the tree being measured.
    code = (
        "import json, runpy, sys; "
        f"ns = runpy.run_path({str(Path(__file__).resolve())!r}); "
        "print(json.dumps(ns['packed_group'](sys.argv[1], sys.argv[2], "
        "int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])))"
    )
    return ["-c", code, bootstrap, topic, str(partitions), str(members), impl]


def run(
    baseline: Path,
    bootstrap: str,
    repeat: int,
    members: int,
    partitions: int,
    ack_members: int,
    confluent: bool = False,
) -> dict[str, Any]:
    """Every sample, by case and tree, plus summaries."""
    trees = {"ours": REPO_ROOT, "baseline": baseline}
    variants = [*trees, "confluent-848"] if confluent else list(trees)
    topic = f"bench-packed-{partitions}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    warm_topic_for_groups(bootstrap, topic, partitions)  # see the docstring
    packed: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    ack: dict[str, list[list[float]]] = {name: [] for name in trees}
    failures: list[dict[str, Any]] = []
    for rep in range(repeat):
        order = ["ours", "baseline"] if rep % 2 == 0 else ["baseline", "ours"]
        for name in order:
            point = _child(trees[name], _packed_args(bootstrap, topic, partitions, members))
            point["load_1m"], point["rep"] = os.getloadavg()[0], rep
            packed[name].append(point)
            if ack_members:
                samples = _child(trees[name], ["-c", _ACK, bootstrap, str(ack_members)])
                if isinstance(samples, dict):
                    failures.append({"case": "ack", "tree": name, "rep": rep, **samples})
                else:
                    ack[name].extend(samples)
            log(f"scaling A/B rep {rep} {name}: {point} (load {os.getloadavg()[0]:.1f})")
        if confluent:
            args = _packed_args(bootstrap, topic, partitions, members, "confluent-848")
            point = _child(REPO_ROOT, args)
            point["load_1m"], point["rep"] = os.getloadavg()[0], rep
            packed["confluent-848"].append(point)
            log(f"scaling A/B rep {rep} confluent-848: {point}")
    summaries: dict[str, Any] = {}
    for name in variants:
        failed = [p for p in packed[name] if "failed" in p]
        packed[name] = [p for p in packed[name] if "failed" not in p]
        failures.extend({"case": "packed", "tree": name, **p} for p in failed)
        totals = [sample[0] for sample in ack.get(name, [])]
        sdk = [sample[1] for sample in ack.get(name, [])]
        summaries[name] = {
            "cold_join_s": [round(p["cold_join_s"], 2) for p in packed[name]],
            "join_s": [round(p["join_s"], 2) for p in packed[name]],
            "steady_background_cpu_pct": [
                round(p["steady_cpu_pct"]["background"], 1) for p in packed[name]
            ],
            "steady_other_cpu_pct": [round(p["steady_cpu_pct"]["other"], 1) for p in packed[name]],
            "ack_samples": len(totals),
            "ack_total_p50_ms": percentile(totals, 0.5),
            "ack_total_p99_ms": percentile(totals, 0.99),
            "ack_sdk_p99_ms": percentile(sdk, 0.99),
        }
    return {
        "topic": topic,
        "packed": packed,
        "ack": ack,
        "failures": failures,
        "summaries": summaries,
    }


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling_ab")
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--members", type=int, default=25)
    parser.add_argument("--partitions", type=int, default=900)
    parser.add_argument("--ack-members", type=int, default=50)
    parser.add_argument("--confluent", action="store_true", help="add confluent's packed group")
    parser.add_argument("--name", default="scaling_ab", help="result file name, no .json")
    args = parser.parse_args()
    if args.bootstrap is None:
        parser.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    for option in ("repeat", "members", "partitions"):
        if getattr(args, option) < 1:
            parser.error(f"--{option}: must be at least 1")
    if args.ack_members < 0:
        parser.error("--ack-members: must be 0 (skip) or more")
    started = time.time()
    load = list(os.getloadavg())
    result = run(
        args.baseline_tree,
        args.bootstrap,
        args.repeat,
        args.members,
        args.partitions,
        args.ack_members,
        args.confluent,
    )
    payload = {
        "benchmark": "scaling_ab",
        "size": "full",  # docs/benchmarks.md's conditions table lists every result file's size
        "repeat": args.repeat,
        "command": "python -m benchmarks.scaling_ab " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": time.time() - started,
        "loadavg_before": load,
        "loadavg_after": list(os.getloadavg()),
        "machine": machine_facts(),
        "external_broker": True,
        "result": result,
    }
    log(f"wrote {write_result(DEFAULT_RESULTS_DIR, args.name, payload)}")
    for name, stats in result["summaries"].items():
        print(f"{name}: {json.dumps(stats)}")
    for failure in result["failures"]:
        print(f"FAILED {failure['case']} {failure['tree']}: {failure['failed'][-600:]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
