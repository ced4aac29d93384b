"""At-least-once with manual commits: commit after processing each batch, and before revocation.

    python examples/manual_commit.py BOOTSTRAP TOPIC GROUP [MAX_RECORDS]

With ``enable.auto.commit=false`` nothing is committed for you. Committing in ``on_revoke``
hands partitions over without duplicates: the new owner starts where this member stopped.

It runs until SIGTERM or Ctrl-C (or until it processed MAX_RECORDS records, when given); then it
finishes the batch in hand, commits it and closes the consumer, which leaves the group at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from consumer import Consumer


def process(value: bytes | None) -> None:
    """Stand-in for the application's work."""


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
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        # Records of these partitions already returned have been processed: commit them.
        owned = {(tp.topic, tp.partition) for tp in partitions}
        positions = [
            tp
            for tp in c.position(partitions)
            if tp.offset >= 0 and (tp.topic, tp.partition) in owned
        ]
        if positions:
            c.commit(offsets=positions, asynchronous=False)

    consumer.subscribe([topic], on_revoke=on_revoke)
    processed = 0
    try:
        while not stop.is_set() and (max_records is None or processed < max_records):
            wanted = 500 if max_records is None else min(500, max_records - processed)
            batch = consumer.consume(num_messages=wanted, timeout=0.5)
            if not batch:
                continue
            for message in batch:
                if message.error() is None:
                    process(message.value())
                    processed += 1
            consumer.commit(asynchronous=False)  # everything returned so far is processed
    finally:
        consumer.close()  # on_revoke commits anything processed since the last commit
    print(f"stopped after {processed} records", flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    limit = int(sys.argv[4]) if len(sys.argv) == 5 else None
    main(*sys.argv[1:4], max_records=limit, stop=stop_on_signals())
