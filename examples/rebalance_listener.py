"""Watch rebalances: on_assign / on_revoke / on_lost, and the member state machine.

    python examples/rebalance_listener.py BOOTSTRAP TOPIC GROUP

Run it twice in two terminals and watch partitions move: the first member revokes exactly the
partitions the second receives (revoke before assign), and epochs only move forward.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from consumer import Consumer


def show(what: str, partitions: list[Any]) -> None:
    print(f"{time.strftime('%X')} {what}: {sorted(tp.partition for tp in partitions)}", flush=True)


def main(bootstrap_servers: str, topic: str, group_id: str, run_seconds: float = 30.0) -> None:
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
    deadline = time.monotonic() + run_seconds
    try:
        while time.monotonic() < deadline:
            consumer.poll(0.2)  # callbacks run here, on this thread
    finally:
        print(f"member {consumer.memberid()} at epoch {consumer.member_epoch} leaving", flush=True)
        consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
