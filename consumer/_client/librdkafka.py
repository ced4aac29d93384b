"""The one module that constructs librdkafka consumers (``confluent_kafka.Consumer``).

Every librdkafka consumer in this package runs in assign mode: it never subscribes, never
commits and never stores offsets, because the KIP-848 member owns all of that with its epoch.
The consumer's data plane (:mod:`consumer._client.dataplane`) and the Spark source's fetchers
and metadata client build theirs here, so that guarantee is enforced in one place. The one
exception is asked for by name: ``group.protocol=classic`` (:mod:`consumer._client.classic`)
runs librdkafka's own classic-protocol group member, built by :func:`classic_consumer`.

librdkafka refuses to create a consumer without a ``group.id`` even in assign mode; with
``enable.auto.commit=false`` and no ``subscribe()`` it neither joins that group nor commits to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer

__all__ = ["LibrdkafkaConsumer", "assign_mode_consumer", "classic_consumer"]

#: The librdkafka consumer type (for annotations outside this module).
LibrdkafkaConsumer = Consumer


def assign_mode_consumer(config: Mapping[str, Any]) -> LibrdkafkaConsumer:
    """A new librdkafka consumer for ``config`` with auto-commit and offset storing forced off.

    ``config`` is a librdkafka configuration dict, already validated by the caller.
    """
    settings = dict(config)
    settings["enable.auto.commit"] = False
    settings["enable.auto.offset.store"] = False
    return Consumer(settings)


def classic_consumer(config: Mapping[str, Any]) -> LibrdkafkaConsumer:
    """A new librdkafka consumer that is its own classic-protocol group member: it subscribes,
    commits and stores offsets as ``config`` says (``group.protocol=classic``, validated)."""
    return Consumer(dict(config))
