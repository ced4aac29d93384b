"""One throughput run with its CPU cost; as a program, in a fresh process for A/B runs of trees.

:func:`run_with_cpu` adds the CPU the run cost per record to a run's result: the whole process's
(every thread: the member's background thread and librdkafka's too) and the calling thread's
(where ``poll()`` / ``consume()`` run), each from the consumer's creation to its close. Unlike
records/s these hardly depend on how much of the CPUs other work on the machine leaves.

``python -m benchmarks._throughput_proc '<json spec>'`` with ``impl`` (a way of
:data:`benchmarks.throughput.IMPLEMENTATIONS`), ``bootstrap``, ``topic``, ``total``, ``size`` and
optionally ``overrides`` (librdkafka keys given to both clients, e.g. one of
:data:`benchmarks.throughput.PREFETCH`) runs :func:`benchmarks.throughput.run_once` with the
``consumer`` package of the tree it is started from (``PYTHONPATH``) and prints its result as
one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

RunOnce = Callable[[str, str, str, int, int], dict[str, Any]]


def run_with_cpu(
    once: RunOnce, impl: str, bootstrap: str, topic: str, total: int, size: int
) -> dict[str, Any]:
    """``once(impl, bootstrap, topic, total, size)`` plus ``process_cpu_us_per_record`` and
    ``thread_cpu_us_per_record`` (0.0 when nothing was consumed)."""
    process_s, thread_s = time.process_time(), time.thread_time()
    result = once(impl, bootstrap, topic, total, size)
    process_s, thread_s = time.process_time() - process_s, time.thread_time() - thread_s
    consumed = int(result["consumed"])
    result["process_cpu_us_per_record"] = process_s * 1e6 / consumed if consumed else 0.0
    result["thread_cpu_us_per_record"] = thread_s * 1e6 / consumed if consumed else 0.0
    return result


def main(argv: list[str]) -> int:
    """Entry point: one spec argument, one JSON line out."""
    from benchmarks.throughput import run_once  # which imports this module

    spec = json.loads(argv[0])
    overrides = dict(spec.get("overrides") or {})
    result = run_with_cpu(
        lambda impl, bootstrap, topic, total, size: run_once(
            impl, bootstrap, topic, total, size, overrides
        ),
        str(spec["impl"]),
        str(spec["bootstrap"]),
        str(spec["topic"]),
        int(spec["total"]),
        int(spec["size"]),
    )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
