"""One throughput run in a fresh process, for A/B runs of two source trees.

``python -m benchmarks._throughput_proc '<json spec>'`` with ``impl`` (a way of
:data:`benchmarks.throughput.IMPLEMENTATIONS`), ``bootstrap``, ``topic``, ``total`` and ``size``
runs :func:`benchmarks.throughput.run_once` with the ``consumer`` package of the tree it is
started from (``PYTHONPATH``) and prints its result as one JSON line.
"""

from __future__ import annotations

import json
import sys

from benchmarks.throughput import run_once


def main(argv: list[str]) -> int:
    """Entry point: one spec argument, one JSON line out."""
    spec = json.loads(argv[0])
    result = run_once(
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
