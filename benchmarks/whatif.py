"""What-if experiments behind the proposed fixes (monkeypatches in this process only).

``python -m benchmarks.whatif [--bootstrap HOST:PORT]`` measures, interleaved, the library as it
is against the library with one change applied by monkeypatching (the library files are not
modified), and writes ``benchmarks/results/whatif.json``, which the report shows.

* ``slices-10ms``: ``poll()`` waits in 10 ms slices all the time, as before the background's
  promise of quiet (``consumer._bridge.quiet``) let an idle STABLE member wait up to 250 ms:
  what the long waits save in CPU, and that they cost nothing in ack latency.
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
def slices_10ms() -> Iterator[None]:
    """``poll()`` / ``consume()`` wait in 10 ms slices even while quiet is promised."""
    import consumer._client.polling as module

    original = module._QUIET_POLL_SLICE_MAX_S
    module._QUIET_POLL_SLICE_MAX_S = module.POLL_SLICE_S
    try:
        yield
    finally:
        module._QUIET_POLL_SLICE_MAX_S = original


def ack_whatif(bootstrap: str, repeat: int) -> dict[str, Any]:
    """Ack latency (1 member, 20 growth steps) as is vs with ``slices_10ms``."""
    samples: dict[str, list[float]] = {"as-is": [], "slices-10ms": []}
    for _ in range(repeat):
        samples["as-is"] += [s[0] for s in ack_latency.run_case(bootstrap, 1, 8, 20, 4)]
        with slices_10ms():
            samples["slices-10ms"] += [s[0] for s in ack_latency.run_case(bootstrap, 1, 8, 20, 4)]
    return {
        key: {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "n": len(v)}
        for key, v in samples.items()
    }


def cost_whatif(bootstrap: str, members: int, window_s: float) -> dict[str, Any]:
    """CPU of ``members`` idle members as is and with 10 ms slices throughout."""
    from benchmarks.member_cost import measure

    base = measure(bootstrap, "ours", 0, 0.0, window_s)
    out: dict[str, Any] = {"members": members, "window_s": window_s}
    for key, quiet_max_s in (("as-is", None), ("slices-10ms", 0.01)):
        row = measure(bootstrap, "ours", members, 5.0, window_s, quiet_max_s)
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
