"""N idle share-group members in this process; CPU and RSS measured over a window.

:func:`cost_main` runs in a child process from the share fork server
(:func:`benchmarks._share_proc.member_processes`) with a spec: ``impl`` (``ours`` or
``confluent``), ``members``, ``bootstrap``, ``group``, ``topic`` (one partition per member, no
records: the members only heartbeat and wait on their share fetches), ``warmup_s`` and
``window_s``. Each
member has its own thread calling ``poll(1.0)``, as an application waiting for records would.
The window opens once the broker's ShareGroupDescribe shows every member with an assignment
covering every partition, plus ``warmup_s``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
import uuid
from multiprocessing.connection import Connection
from typing import Any

import psutil
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse
from kio.schema.types import GroupId

from benchmarks._share_proc import build
from consumer._runtime.cluster import ClusterClient

SETTLE_TIMEOUT_S = 90.0


async def _assigned(bootstrap: str, group: str) -> list[int]:
    """Partitions assigned to each member of ``group``, per ShareGroupDescribe ([] if none)."""
    request = ShareGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False
    )
    async with ClusterClient(bootstrap) as cluster:
        response = await cluster.coordinator_request(group, request)
    assert isinstance(response, ShareGroupDescribeResponse)
    (described,) = response.groups
    if described.error_code != 0 or described.group_state.lower() != "stable":
        return []
    return [
        sum(len(entry.partitions) for entry in member.assignment.topic_partitions)
        for member in described.members
    ]


def wait_settled(bootstrap: str, group: str, members: int) -> float:
    """Seconds until every member owns a partition and all ``members`` are owned."""
    start = time.monotonic()
    while True:  # bounded predicate wait
        owned = asyncio.run(_assigned(bootstrap, group))
        if len(owned) == members and all(owned) and sum(owned) == members:
            return time.monotonic() - start
        if time.monotonic() - start > SETTLE_TIMEOUT_S:
            raise TimeoutError(f"share members did not settle: owned {owned}")
        time.sleep(0.2)


def main(spec: dict[str, Any]) -> dict[str, Any]:
    """Build, subscribe, settle, measure; returns the measurement."""
    members = int(spec["members"])
    group = str(spec.get("group") or f"bench-share-cost-{uuid.uuid4().hex[:8]}")
    base = {"impl": spec["impl"], "bootstrap": spec["bootstrap"], "group": group}
    consumers = [build({**base, "mode": "implicit"}) for _ in range(members)]
    for consumer in consumers:
        consumer.subscribe([spec["topic"]])
    stop = threading.Event()

    def loop(consumer: Any) -> None:
        while not stop.is_set():
            consumer.poll(1.0)

    threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in consumers]
    for thread in threads:
        thread.start()
    settle_s = wait_settled(spec["bootstrap"], group, members) if members else 0.0
    time.sleep(float(spec["warmup_s"]))  # let start-up work finish before the window
    process = psutil.Process()
    cpu0 = process.cpu_times()
    wall0 = time.monotonic()
    time.sleep(float(spec["window_s"]))  # the measurement window itself
    cpu1 = process.cpu_times()
    wall = time.monotonic() - wall0
    rss = process.memory_info().rss
    threads_count = process.num_threads()
    stop.set()
    for thread in threads:
        thread.join(5)
    for consumer in consumers:
        consumer.close()
    cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "impl": spec["impl"],
        "members": members,
        "rss_mb": rss / 2**20,
        "cpu_pct": 100 * cpu_s / wall,
        "window_s": wall,
        "threads": threads_count,
        "settle_s": settle_s,
    }


def cost_main(spec: dict[str, Any], pipe: Connection) -> None:
    """Child process: send ``{"ok": measurement}`` or ``{"error": traceback}``."""
    try:
        pipe.send({"ok": main(spec)})
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        pipe.send({"error": traceback.format_exc()})
