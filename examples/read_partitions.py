"""Read given partitions from given offsets, as a replay or inspection tool does (manual
assignment: the consumer joins no group).

    python examples/read_partitions.py BOOTSTRAP GROUP TOPIC PARTITION:OFFSET [...]

Written for ``confluent_kafka.Consumer``; it runs unchanged on ``consumer.Consumer`` once
``Consumer`` is imported from ``consumer`` instead
(``tests/integration/test_read_partitions_example.py`` runs it both ways and compares the
output). It prints each partition's watermarks, every record from the given offset to the end,
commits what it read to GROUP (as a consumer that is not a group member), reads the first
partition again from its offset (``seek``), and prints the committed offsets.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

#: How long the tool waits for the records up to the high watermark before giving up.
READ_TIMEOUT_S = 30.0


def read_to_end(consumer: Any, ends: dict[int, int], label: str) -> None:
    """Read until each partition in ``ends`` reached its end offset; print the records of each
    partition in turn (records of different partitions arrive interleaved)."""
    records: dict[int, list[str]] = {partition: [] for partition in ends}
    left = set(ends)
    deadline = time.monotonic() + READ_TIMEOUT_S
    while left:
        if time.monotonic() > deadline:
            raise SystemExit(f"{label}: partitions {sorted(left)} did not reach their end")
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            raise KafkaException(message.error())
        partition, offset = message.partition(), message.offset()
        records[partition].append(f"{label} {partition} {offset} {message.value().decode()}")
        if offset + 1 >= ends[partition]:
            left.discard(partition)
    for partition in sorted(records):
        print("\n".join(records[partition]))


def main(bootstrap_servers: str, group_id: str, topic: str, starts: dict[int, int]) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "enable.auto.commit": False,
        }
    )
    ends = {}
    for partition in sorted(starts):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        print(f"partition {partition}: offsets {low}..{high}")
        ends[partition] = high
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in sorted(starts.items())])
    with_records = {p: end for p, end in ends.items() if 0 <= starts[p] < end}
    read_to_end(consumer, with_records, "read")
    consumer.commit(asynchronous=False)

    first = min(starts)
    consumer.seek(TopicPartition(topic, first, starts[first]))
    read_to_end(consumer, {p: end for p, end in with_records.items() if p == first}, "again")
    try:
        consumer.seek(TopicPartition(topic, first + len(starts) + 100, 0))
    except KafkaException as exc:
        print(f"seek of an unassigned partition: {exc.args[0].name()}")

    partitions = [TopicPartition(topic, p) for p in sorted(starts)]
    for tp in consumer.committed(partitions, timeout=10):
        print(f"committed {tp.partition} {tp.offset}")
    consumer.close()


if __name__ == "__main__":
    bootstrap, group, topic_name, *specs = sys.argv[1:]
    wanted = {int(p): int(o) for p, o in (spec.split(":") for spec in specs)}
    main(bootstrap, group, topic_name, wanted)
