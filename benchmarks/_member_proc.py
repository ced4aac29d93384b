"""One group member in its own process, driven by the convergence benchmark.

``python -m benchmarks._member_proc '<json spec>'``. The spec names the implementation
(``ours``, ``confluent-848``, ``classic-coop``, ``classic-eager``), the bootstrap servers, group,
topic, the classic timers and ``busy_ms`` (default 0: simulated processing per loop turn,
see :func:`main`). Protocol, one JSON object per line on stdout, ``at`` being
``time.monotonic()`` (system-wide on Linux, so comparable with the parent's stamps):

* ``{"ev": "ready"}`` once the consumer is built; then the child waits for ``go`` on stdin;
* ``{"ev": "assign"|"revoke"|"lost", "at", "parts": [...]}`` from the rebalance callbacks;
* ``{"ev": "state", "at", "state"}`` (ours only): member state changes, stamped on the
  background thread the moment they happen (``BackgroundRuntime._publish`` is wrapped here; the
  library is not modified);
* ``{"ev": "closing", "at"}`` / ``{"ev": "closed", "at"}`` around ``close()`` after ``close`` on
  stdin.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

_out_lock = threading.Lock()


def emit(event: dict[str, Any]) -> None:
    """Write one event line (thread-safe)."""
    line = json.dumps(event) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def _patch_state_stamps() -> None:
    from consumer._runtime.background import BackgroundRuntime

    original = BackgroundRuntime._publish

    def publish(self: BackgroundRuntime) -> None:
        before = self.state
        original(self)
        if self.state is not before:
            emit({"ev": "state", "at": time.monotonic(), "state": self.state.name})

    BackgroundRuntime._publish = publish  # type: ignore[method-assign]


def build(spec: dict[str, Any], stamp_states: bool = True) -> Any:
    """The consumer ``spec`` asks for (``stamp_states``: emit ours' state changes)."""
    config: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "auto.offset.reset": "earliest",
        "client.id": spec.get("name", "bench-member"),
    }
    impl = spec["impl"]
    if impl == "ours":
        if stamp_states:
            _patch_state_stamps()
        from consumer import Consumer

        return Consumer(config)
    from confluent_kafka import Consumer as ConfluentConsumer

    if impl == "confluent-848":
        return ConfluentConsumer({**config, "group.protocol": "consumer"})
    strategy = {"classic-coop": "cooperative-sticky", "classic-eager": "range"}[impl]
    return ConfluentConsumer(
        {
            **config,
            "group.protocol": "classic",
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": int(spec["session_ms"]),
            "heartbeat.interval.ms": int(spec["heartbeat_ms"]),
            # The rebalance timeout of both protocols; set to librdkafka's (and ours') default,
            # which the KIP-848 members use too, so every implementation gets the same one.
            "max.poll.interval.ms": int(spec.get("max_poll_interval_ms", 300_000)),
        }
    )


def main(spec: dict[str, Any]) -> None:
    """Build, wait for ``go``, subscribe and poll until ``close``.

    With ``busy_ms`` > 0 every loop turn also spends that long "processing" (a sleep, standing for
    an application that writes each batch somewhere before polling again): rebalance callbacks,
    and a classic member's rejoin, then wait for the application's next ``poll()``.
    """
    busy_s = float(spec.get("busy_ms", 0)) / 1000
    consumer = build(spec)
    emit({"ev": "ready", "at": time.monotonic()})
    if sys.stdin.readline().strip() != "go":
        consumer.close()
        return

    def callback(kind: str) -> Any:
        def on_event(_consumer: Any, partitions: list[Any]) -> None:
            emit({"ev": kind, "at": time.monotonic(), "parts": [tp.partition for tp in partitions]})

        return on_event

    closing = threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        closing.set()

    consumer.subscribe(
        [spec["topic"]],
        on_assign=callback("assign"),
        on_revoke=callback("revoke"),
        on_lost=callback("lost"),
    )
    threading.Thread(target=read_commands, daemon=True).start()
    while not closing.is_set():
        consumer.poll(0.1)
        if busy_s:
            closing.wait(busy_s)  # simulated processing (a stand-in for work, not a sync)
    emit({"ev": "closing", "at": time.monotonic()})
    consumer.close()
    emit({"ev": "closed", "at": time.monotonic()})


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
