"""Watch rebalances: on_assign / on_revoke / on_lost, and the member state machine.

    python examples/rebalance_listener.py BOOTSTRAP TOPIC GROUP [SECONDS]

Run it twice in two terminals and watch partitions move: the first member revokes exactly the
partitions the second receives (revoke before assign), and epochs only move forward. It runs
until SIGTERM or Ctrl-C (or for SECONDS, when given), then closes: the member revokes its
partitions and leaves the group, and the other one takes them over at once.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

from consumer import Consumer


def show(what: str, partitions: list[Any]) -> None:
    print(f"{time.strftime('%X')} {what}: {sorted(tp.partition for tp in partitions)}", flush=True)


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
    run_seconds: float | None = None,
    stop: threading.Event | None = None,
) -> None:
    stop = stop or threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "on_state_change": lambda old, new: print(f"state {old} -> {new}", flush=True),
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: show("assigned", ps),
        on_revoke=lambda c, ps: show("revoked", ps),
        on_lost=lambda c, ps: show("lost (no commit possible)", ps),
    )
    deadline = None if run_seconds is None else time.monotonic() + run_seconds
    try:
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            consumer.poll(0.2)  # callbacks run here, on this thread
    finally:
        print(f"member {consumer.memberid()} at epoch {consumer.member_epoch} leaving", flush=True)
        consumer.close()


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    seconds = float(sys.argv[4]) if len(sys.argv) == 5 else None
    main(*sys.argv[1:4], run_seconds=seconds, stop=stop_on_signals())
