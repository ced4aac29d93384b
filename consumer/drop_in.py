"""confluent-kafka's namespace with this package's consumers in it, for programs that write
``import confluent_kafka`` and then ``confluent_kafka.Consumer(...)``.

Change that one line to ``import consumer.drop_in as confluent_kafka`` and the rest of the
program runs unchanged: ``confluent_kafka.Consumer`` and ``confluent_kafka.ShareConsumer`` are
this package's, every other name (``Producer``, ``TopicPartition``, ``KafkaError``,
``KafkaException``, ``OFFSET_INVALID``, ``admin``, ...) is confluent-kafka's own object, so
``isinstance`` checks, error codes and constants compare equal with code that still imports
confluent-kafka directly. Programs that import names (``from confluent_kafka import Consumer``)
need only ``from consumer import Consumer`` instead; see the migration guide.

The module deliberately has no ``__all__`` of its own: its names are confluent-kafka's public
names (its ``__all__``), documented by confluent-kafka.
"""

from __future__ import annotations

from confluent_kafka import *  # noqa: F403  (the point of this module: every public name)
from confluent_kafka import admin as admin

# Replacing confluent-kafka's two consumers is what this module is for; mypy sees the names the
# star import brought in and would have them keep confluent-kafka's types.
from consumer import Consumer as Consumer  # type: ignore[assignment]
from consumer import ShareConsumer as ShareConsumer  # type: ignore[assignment]
