"""Quickstart: a service that consumes a topic as a member of a consumer group (KIP-848).

    python examples/quickstart.py BOOTSTRAP TOPIC GROUP [MAX_RECORDS]

It prints every record and runs until SIGTERM or Ctrl-C (or, when given, until it has printed
MAX_RECORDS records), then shuts down gracefully: ``close()`` commits the offsets of what it
printed, revokes its partitions and leaves the group at once, so the other members take them
over without waiting for a session timeout.

The only change from a confluent-kafka application is the import line.
"""

from __future__ import annotations

import signal
import sys
import threading

from consumer import Consumer  # was: from confluent_kafka import Consumer


def stop_on_signals() -> threading.Event:
    """An event that SIGTERM (``kill``, a container stop) and SIGINT (Ctrl-C) set."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    return stop


def main(
    bootstrap_servers: str,
    topic: str,
    group_id: str,
    max_records: int | None = None,
    stop: threading.Event | None = None,
) -> None:
    stop = stop or threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    printed = 0
    try:
        while not stop.is_set() and (max_records is None or printed < max_records):
            message = consumer.poll(0.5)  # a signal is noticed within this timeout
            if message is None:
                continue
            if message.error() is not None:
                print(f"error: {message.error()}", file=sys.stderr)
                continue
            print(
                f"{message.topic()}[{message.partition()}]@{message.offset()}: {message.value()!r}",
                flush=True,
            )
            printed += 1
    finally:
        consumer.close()  # commits, revokes and leaves the group at once
    print(f"stopped after {printed} records", flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    limit = int(sys.argv[4]) if len(sys.argv) == 5 else None
    main(*sys.argv[1:4], max_records=limit, stop=stop_on_signals())
