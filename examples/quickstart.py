"""Quickstart: consume a topic as a member of a consumer group (KIP-848).

    python examples/quickstart.py BOOTSTRAP TOPIC GROUP

The only change from a confluent-kafka application is the import line.
"""

from __future__ import annotations

import sys

from consumer import Consumer  # was: from confluent_kafka import Consumer


def main(bootstrap_servers: str, topic: str, group_id: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        idle_polls = 0
        while idle_polls < 20:  # stop after ~2 s without records once partitions are assigned
            message = consumer.poll(0.1)
            if message is None:
                if consumer.assignment():  # joining the group takes a moment at the start
                    idle_polls += 1
                continue
            idle_polls = 0
            if message.error() is not None:
                print(f"error: {message.error()}", file=sys.stderr)
                continue
            print(
                f"{message.topic()}[{message.partition()}]@{message.offset()}: {message.value()!r}"
            )
    finally:
        consumer.close()  # commits, revokes and leaves the group at once


if __name__ == "__main__":
    main(*sys.argv[1:4])
