"""``import consumer.drop_in as confluent_kafka``: confluent-kafka's names, our two consumers."""

from __future__ import annotations

import confluent_kafka

import consumer
import consumer.drop_in as drop_in


def test_the_consumers_are_ours() -> None:
    assert drop_in.Consumer is consumer.Consumer
    assert drop_in.ShareConsumer is consumer.ShareConsumer


def test_every_other_public_name_is_confluent_kafkas_own_object() -> None:
    others = [name for name in confluent_kafka.__all__ if name not in ("Consumer", "ShareConsumer")]
    assert others, "confluent_kafka.__all__ is empty"
    mismatched = [n for n in others if getattr(drop_in, n) is not getattr(confluent_kafka, n)]
    assert mismatched == []
    assert drop_in.admin.AdminClient is confluent_kafka.admin.AdminClient


def test_it_declares_no_api_of_its_own() -> None:
    # Its names are confluent-kafka's, documented there; the API reference covers modules with
    # an __all__ of their own.
    assert not hasattr(drop_in, "__all__")
