"""Delivery latency: from ``produce()`` to the idle consumer's ``poll()`` returning the record.

One STABLE member (ours, or confluent-kafka's KIP-848 consumer) sits in ``poll(1.0)`` on its
own thread, idle; a producer (``linger.ms=0``, ``acks=1``) sends one record at a random moment
(50-550 ms after the last one arrived, so at a random phase of the heartbeat cycle and of our
``poll()``'s waits) whose value is the ``time.monotonic()`` of the ``produce()`` call. The
sample is the time until ``poll()`` returned it. The two implementations alternate per
repetition, on the 500 ms-heartbeat broker. It shows whether the long waits of an idle member
(``consumer._bridge.quiet``) delay records: librdkafka's poll returns as soon as a record
arrives, whatever the wait's length.
"""

from __future__ import annotations

import random
import struct
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer

from benchmarks.common import create_topic, log, percentile, summary, wait_for
from consumer import Consumer as OurConsumer

IMPLEMENTATIONS = ("ours", "confluent-848")
_STAMP = struct.Struct(">d")


class _Receiver:
    """A consumer polling on its own thread; notes when each stamped record arrived."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.latencies_s: list[float] = []
        self.arrived = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self.consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            now = time.monotonic()
            value = message.value()
            if value is not None and len(value) == _STAMP.size:
                self.latencies_s.append(now - _STAMP.unpack(value)[0])
                self.arrived.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def run_case(bootstrap: str, impl: str, samples: int, rng: random.Random) -> list[float]:
    """``samples`` delivery latencies (ms) of ``impl``."""
    topic = f"bench-delivery-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-delivery-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
    }
    if impl == "ours":
        consumer: Any = OurConsumer(config)
    else:
        consumer = ConfluentConsumer({**config, "group.protocol": "consumer"})
    consumer.subscribe([topic])
    receiver = _Receiver(consumer)
    receiver.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    try:
        # A first record proves the member STABLE and fetching; it is not a sample.
        producer.produce(topic, _STAMP.pack(time.monotonic()))
        producer.flush(10)
        wait_for(receiver.arrived.is_set, 60, f"{impl}: the first record")
        time.sleep(2.0)  # let the group go idle (heartbeats only) before sampling
        receiver.latencies_s.clear()
        for index in range(samples):
            receiver.arrived.clear()
            time.sleep(rng.uniform(0.05, 0.55))  # a random phase: pacing, not synchronisation
            producer.produce(topic, _STAMP.pack(time.monotonic()))
            producer.poll(0)
            wait_for(receiver.arrived.is_set, 30, f"{impl}: record {index}", step_s=0.005)
        producer.flush(10)
        return [s * 1000 for s in receiver.latencies_s]
    finally:
        receiver.stop()


def run(bootstrap: str, size: str, repeat: int) -> dict[str, Any]:
    """Delivery latency of both implementations, alternating, ``repeat`` rounds."""
    samples = 40 if size == "full" else 5
    rng = random.Random(848)
    by_impl: dict[str, list[float]] = {impl: [] for impl in IMPLEMENTATIONS}
    for rep in range(repeat):
        for impl in IMPLEMENTATIONS if rep % 2 == 0 else reversed(IMPLEMENTATIONS):
            got = run_case(bootstrap, impl, samples, rng)
            by_impl[impl] += got
            log(f"delivery latency {impl} round {rep}: p50 {percentile(got, 0.5):.1f} ms")
    return {
        "samples_per_round": samples,
        "stats": {
            impl: {
                **summary(values),
                "p50": percentile(values, 0.5),
                "p99": percentile(values, 0.99),
            }
            for impl, values in by_impl.items()
        },
    }


def section(payload: dict[str, Any], _out: Path) -> list[str]:
    """The report's section."""
    stats = payload["result"]["stats"]
    lines = [
        "## Delivery latency of an idle member",
        "",
        "From `produce()` of one record to the idle member's `poll()` returning it: one STABLE "
        "member polling with `poll(1.0)` on its own thread, one record at a time at a random "
        "moment (50–550 ms after the last one arrived), producer with `linger.ms=0`; 500 ms "
        f"broker, implementations alternating, {payload['repeat']} rounds of "
        f"{payload['result']['samples_per_round']} records.",
        "",
        "| implementation | samples | p50 (ms) | p99 (ms) | max (ms) |",
        "|---|---|---|---|---|",
    ]
    for impl, row in stats.items():
        lines.append(
            f"| {impl} | {row['n']} | {row['p50']:.1f} | {row['p99']:.1f} | {row['max']:.1f} |"
        )
    lines.append("")
    return lines
