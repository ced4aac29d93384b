"""Static membership: restart within the session timeout and keep your partitions.

    python examples/static_membership.py BOOTSTRAP TOPIC GROUP INSTANCE_ID

With ``group.instance.id`` set, close() leaves with epoch -2 ("I will be back"): the coordinator
keeps this member's partitions for the broker's session timeout instead of rebalancing them.
A restarted process with the same instance id gets the same partitions back; the other members
see no rebalance at all.
"""

from __future__ import annotations

import sys
import time

from consumer import Consumer


def main(bootstrap_servers: str, topic: str, group_id: str, instance_id: str) -> None:
    for incarnation in (1, 2):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": group_id,
                "group.instance.id": instance_id,
            }
        )
        consumer.subscribe([topic])
        deadline = time.monotonic() + 15
        # Right after joining the member is briefly STABLE with nothing; wait for partitions.
        while not (consumer.state == "STABLE" and consumer.assignment()):
            if time.monotonic() > deadline:
                break
            consumer.poll(0.1)
        owned = sorted(tp.partition for tp in consumer.assignment())
        print(f"incarnation {incarnation}: epoch {consumer.member_epoch}, partitions {owned}")
        consumer.close()  # a static member's close keeps its place in the group


if __name__ == "__main__":
    main(*sys.argv[1:5])
