"""Static membership: restart within the session timeout and keep your partitions.

    python examples/static_membership.py BOOTSTRAP TOPIC GROUP INSTANCE_ID [MAX_RECORDS]

With ``group.instance.id`` set, close() leaves with epoch -2 ("I will be back"): the coordinator
keeps this member's partitions for the broker's session timeout instead of rebalancing them.
Stop it (SIGTERM or Ctrl-C) and start it again with the same instance id: it gets the same
partitions back, and the other members see no rebalance at all. It runs until stopped (or until
it consumed MAX_RECORDS records, when given); it commits what it consumed when it closes.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from consumer import Consumer


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
    instance_id: str,
    max_records: int | None = None,
    stop: threading.Event | None = None,
) -> None:
    stop = stop or threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "group.instance.id": instance_id,
            "auto.offset.reset": "earliest",
        }
    )

    def on_assign(c: Any, partitions: list[Any]) -> None:
        if partitions:
            owned = sorted(tp.partition for tp in partitions)
            print(f"{instance_id}: assigned {owned} at member epoch {c.member_epoch}", flush=True)

    consumer.subscribe([topic], on_assign=on_assign)
    consumed = 0
    try:
        while not stop.is_set() and (max_records is None or consumed < max_records):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed += 1
    finally:
        consumer.close()  # a static member's close keeps its place in the group
    print(f"{instance_id}: stopped after {consumed} records", flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    limit = int(sys.argv[5]) if len(sys.argv) == 6 else None
    main(*sys.argv[1:5], max_records=limit, stop=stop_on_signals())
