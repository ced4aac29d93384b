"""What-if experiments behind the proposed fixes (monkeypatches in this process only).

``python -m benchmarks.whatif [--bootstrap HOST:PORT]`` measures, interleaved, the library as it
is against the library with one change applied by monkeypatching (the library files are not
modified), and writes ``benchmarks/results/whatif.json``, which the report shows.

* ``slice-10ms``: the application thread's blocking slice in ``poll()`` is 10 ms instead of
  50 ms (the ack-latency fix, measured with its CPU cost).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from benchmarks import ack_latency
from benchmarks.common import (
    DEFAULT_RESULTS_DIR,
    BrokerSet,
    machine_facts,
    percentile,
    write_result,
)


@contextlib.contextmanager
def slice_10ms() -> Iterator[None]:
    """A 10 ms blocking slice in ``poll()`` / ``consume()``."""
    import consumer._client.consumer as module

    original = module._POLL_SLICE_S
    module._POLL_SLICE_S = 0.01
    try:
        yield
    finally:
        module._POLL_SLICE_S = original


def ack_whatif(bootstrap: str, repeat: int) -> dict[str, Any]:
    """Ack latency (1 member, 20 growth steps) as is vs with ``slice_10ms``."""
    samples: dict[str, list[float]] = {"as-is": [], "slice-10ms": []}
    for _ in range(repeat):
        samples["as-is"] += [s[0] for s in ack_latency.run_case(bootstrap, 1, 8, 20, 4)]
        with slice_10ms():
            samples["slice-10ms"] += [s[0] for s in ack_latency.run_case(bootstrap, 1, 8, 20, 4)]
    return {
        key: {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "n": len(v)}
        for key, v in samples.items()
    }


def cost_whatif(bootstrap: str, members: int, window_s: float) -> dict[str, Any]:
    """CPU of ``members`` idle members with the 50 ms slice and with a 10 ms slice."""
    from benchmarks.member_cost import measure

    base = measure(bootstrap, "ours", 0, 0.0, window_s)
    out: dict[str, Any] = {"members": members, "window_s": window_s}
    for key, slice_s in (("as-is", None), ("slice-10ms", 0.01)):
        row = measure(bootstrap, "ours", members, 5.0, window_s, slice_s)
        out[key] = {
            "cpu_pct_per_member": (row["cpu_pct"] - base["cpu_pct"]) / members,
            "rss_mb_per_member": (row["rss_mb"] - base["rss_mb"]) / members,
        }
    return out


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.whatif")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    brokers = BrokerSet(fast_bootstrap=args.bootstrap)
    started = time.time()
    load = list(os.getloadavg())
    try:
        bootstrap = brokers.fast()
        result = {
            "ack_latency": ack_whatif(bootstrap, args.repeat),
            "idle_cost": cost_whatif(bootstrap, 10, 20.0),
        }
    finally:
        brokers.close()
    write_result(
        DEFAULT_RESULTS_DIR,
        "whatif",
        {
            "benchmark": "whatif",
            "size": "full",
            "repeat": args.repeat,
            "command": "python -m benchmarks.whatif",
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "duration_s": time.time() - started,
            "loadavg_before": load,
            "loadavg_after": list(os.getloadavg()),
            "machine": machine_facts(),
            "result": result,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
