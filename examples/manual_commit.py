"""At-least-once with manual commits: commit after processing each batch, and before revocation.

    python examples/manual_commit.py BOOTSTRAP TOPIC GROUP

With ``enable.auto.commit=false`` nothing is committed for you. Committing in ``on_revoke``
hands partitions over without duplicates: the new owner starts where this member stopped.
"""

from __future__ import annotations

import sys
from typing import Any

from consumer import Consumer


def process(value: bytes | None) -> None:
    """Stand-in for the application's work."""


def main(bootstrap_servers: str, topic: str, group_id: str) -> None:
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
    try:
        idle = 0
        while idle < 20:  # stop after ~2 s without records once partitions are assigned
            batch = consumer.consume(num_messages=500, timeout=0.1)
            if not batch:
                if consumer.assignment():
                    idle += 1
                continue
            idle = 0
            for message in batch:
                if message.error() is None:
                    process(message.value())
            consumer.commit(asynchronous=False)  # everything returned so far is processed
    finally:
        consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
