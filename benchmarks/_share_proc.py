"""One share-group member in its own process, driven by :mod:`benchmarks.share_throughput`.

The processes come from a fork server that imported ``consumer`` and ``confluent_kafka`` once
(:func:`member_processes`), so a run does not pay an interpreter start and those imports per
member. :func:`member_main` runs in the child with the spec (``impl``: ``ours`` or
``confluent``; ``bootstrap``, ``group``, ``topic``, ``mode``: ``implicit`` or ``explicit``, which
ACCEPTs each record with ``acknowledge``) and one end of a pipe. Events sent to the parent (times
are ``time.monotonic()``, system-wide on Linux, so comparable with the parent's and the
siblings'):

* ``{"ev": "ready"}`` once the consumer is built; the child then waits for ``"go"``;
* ``{"ev": "progress", "n": first_deliveries}`` at most every 50 ms while records arrive, and
  on the first empty ``poll`` after records that were not reported yet;
* ``{"ev": "done", "first", "last", "n", "redelivered", "per_partition", "batches"}`` after
  ``"stop"`` and ``close()``; ``first`` is when the first non-empty ``poll`` returned, ``last``
  when the last record was handled (acknowledged, in explicit mode).
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from typing import Any, Protocol

PROGRESS_EVERY_S = 0.05
POLL_TIMEOUT_S = 0.25
_PRELOAD = ["consumer", "confluent_kafka", "benchmarks._share_proc", "benchmarks._share_cost_proc"]
_context: ForkServerContext | None = None


def member_processes() -> ForkServerContext:
    """The fork-server context every share benchmark child comes from (started on first use)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(_PRELOAD)
    return _context


class EventSink(Protocol):
    """Where :func:`consume` reports progress (the pipe to the parent)."""

    def send(self, obj: Any) -> None:
        """Send one event."""


def build(spec: dict[str, Any]) -> Any:
    """The share consumer ``spec`` asks for."""
    config = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "share.acknowledgement.mode": spec["mode"],
    }
    if spec["impl"] == "ours":
        from consumer import ShareConsumer

        return ShareConsumer(config)
    from confluent_kafka import ShareConsumer as ConfluentShareConsumer

    return ConfluentShareConsumer(config)


def consume(
    consumer: Any, explicit: bool, stop: threading.Event, pipe: EventSink
) -> dict[str, Any]:
    """Poll until ``stop``; the loop every implementation runs (identical per-record work)."""
    count = redelivered = batches = reported = 0
    first: float | None = None
    last: float | None = None
    per_partition: dict[int, int] = {}
    next_progress = 0.0
    poll, acknowledge = consumer.poll, consumer.acknowledge
    while not stop.is_set():
        batch = poll(POLL_TIMEOUT_S)
        if not batch:
            if count != reported:  # the tail that arrived within 50 ms of the last report
                pipe.send({"ev": "progress", "n": count})
                reported = count
            continue
        if first is None:
            first = time.monotonic()
        batches += 1
        for message in batch:
            if message.error() is not None:
                continue
            if message.delivery_count() == 1:
                count += 1
                partition = message.partition()
                per_partition[partition] = per_partition.get(partition, 0) + 1
            else:
                redelivered += 1
            if explicit:
                acknowledge(message)
        last = time.monotonic()
        if last >= next_progress:
            pipe.send({"ev": "progress", "n": count})
            reported, next_progress = count, last + PROGRESS_EVERY_S
    return {
        "first": first,
        "last": last,
        "n": count,
        "redelivered": redelivered,
        "per_partition": per_partition,
        "batches": batches,
    }


def member_main(spec: dict[str, Any], pipe: Connection) -> None:
    """Child process: build, wait for ``go``, subscribe and consume until ``stop``."""
    consumer = build(spec)
    pipe.send({"ev": "ready"})
    if pipe.recv() != "go":
        consumer.close()
        return
    stop = threading.Event()

    def wait_for_stop() -> None:
        try:
            while pipe.recv() != "stop":
                pass
        except EOFError:
            pass
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    consumer.subscribe([spec["topic"]])
    outcome = consume(consumer, spec["mode"] == "explicit", stop, pipe)
    pipe.send({"ev": "progress", "n": outcome["n"]})
    consumer.close()
    pipe.send({"ev": "done", **outcome})
