"""Share consumer: work through a topic's records as one member of a share group (KIP-932).

    python examples/share_consumer.py BOOTSTRAP TOPIC GROUP [MAX_RECORDS]

A plain confluent-kafka ``ShareConsumer`` program. To run it on kafka-group-member instead,
change only the import line to ``from consumer import AcknowledgeType, KafkaException,
ShareConsumer``.

Each record's value should be a number. The program acknowledges every record itself
(``share.acknowledgement.mode=explicit``): ACCEPT when the value is a number, REJECT when it is
not (a rejected record is never delivered again, to any member), and commits the batch's
acknowledgements before the next poll. It stops after MAX_RECORDS records, or once no record came
for IDLE_S seconds, and always closes the consumer (which leaves the group).

Share groups start at the latest offset by default; to read records produced before the group's
first member, set the group config ``share.auto.offset.reset=earliest`` first (an admin
``incremental_alter_configs`` on the GROUP resource).
"""

from __future__ import annotations

import signal
import sys
import threading

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer


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
) -> int:
    stop = stop or threading.Event()
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 100,
        }
    )
    accepted = rejected = 0
    try:
        consumer.subscribe([topic])
        while not stop.is_set() and (max_records is None or accepted + rejected < max_records):
            messages = consumer.poll(1.0)  # a signal is noticed within this timeout
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
                value = message.value() or b""
                where = f"{message.topic()}[{message.partition()}]@{message.offset()}"
                if value.isdigit():
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    accepted += 1
                    verdict = "ACCEPT"
                else:
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
                    rejected += 1
                    verdict = "REJECT"
                print(f"{where} delivery={message.delivery_count()} value={value!r} {verdict}")
            if len(messages) > 0:
                for partition, error in consumer.commit_sync(30).items():
                    if error is not None:
                        print(f"acknowledgements of {partition} failed: {error}", file=sys.stderr)
    except KafkaException as exc:
        print(f"share consumer failed: {exc}", file=sys.stderr)
        return 1
    finally:
        consumer.close()  # sends what is left to acknowledge, releases the rest, leaves
    print(f"done: {accepted} accepted, {rejected} rejected")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    limit = int(sys.argv[4]) if len(sys.argv) == 5 else None
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], limit, stop_on_signals()))
