"""A confluent-kafka ``ShareConsumer`` program's import line works with ``from consumer``."""

from __future__ import annotations

import confluent_kafka

import consumer


def test_the_names_a_share_consumer_program_imports_are_in_consumer() -> None:
    # from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
    assert consumer.ShareConsumer.__module__.startswith("consumer.share_consumer")
    # ShareConsumer raises confluent's KafkaException and takes confluent's AcknowledgeType, so
    # ``except KafkaException`` and ``AcknowledgeType.REJECT`` must be the very same classes.
    assert consumer.KafkaException is confluent_kafka.KafkaException
    assert consumer.AcknowledgeType is confluent_kafka.AcknowledgeType
