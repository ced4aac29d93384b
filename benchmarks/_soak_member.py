"""One member of the soak (``benchmarks.soak``) in its own process: our ``Consumer`` subscribed
to the soak's topic, consuming in batches and committing each batch synchronously, until
SIGTERM (then ``close()``: a graceful leave).

``python -m benchmarks._soak_member '<json spec>'`` with ``bootstrap``, ``group``, ``topic`` and
``counts`` (a file it rewrites every few seconds with ``{"processed": N, "errors": N}``). It
keeps nothing per record, so its memory measures the member, not the harness.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from consumer import Consumer, KafkaException

_COUNTS_EVERY_S = 5.0


def main(spec: dict[str, Any]) -> int:
    """Consume until SIGTERM; returns the exit code."""
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    counts = {"processed": 0, "errors": 0, "commit_failures": 0}

    def on_error(_error: object) -> None:
        counts["errors"] += 1

    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": spec["group"],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": on_error,
        }
    )
    consumer.subscribe([spec["topic"]])
    path = Path(spec["counts"])
    written_at = 0.0
    try:
        while not stopping:
            batch = consumer.consume(200, 0.5)
            records = [m for m in batch if m.error() is None]
            counts["processed"] += len(records)
            if records:
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException:
                    counts["commit_failures"] += 1  # retriable; the next commit covers it
            if time.monotonic() - written_at >= _COUNTS_EVERY_S:
                path.write_text(json.dumps(counts))
                written_at = time.monotonic()
    finally:
        consumer.close()
        path.write_text(json.dumps(counts))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(json.loads(sys.argv[1])))
