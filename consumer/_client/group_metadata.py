"""``Consumer.consumer_group_metadata()``: the bytes confluent-kafka's transactional
``Producer.send_offsets_to_transaction(offsets, metadata)`` takes.

confluent-kafka returns librdkafka's consumer group metadata serialized by
``rd_kafka_consumer_group_metadata_write()`` as plain ``bytes``, and the producer parses them with
``rd_kafka_consumer_group_metadata_read()``; nothing else is in the object. The format
("CGMDv2", ``src/rdkafka_cgrp.c``):

=========  ===========================================================================
magic      the 7 ASCII bytes ``CGMDv2:``
epoch      int32 in the host's byte order (librdkafka ``memcpy``s it); the member epoch
group id   NUL-terminated
member id  NUL-terminated (empty for a consumer that is not a member)
instance   int8 1 = no ``group.instance.id``; else 0 and the NUL-terminated id
=========  ===========================================================================

The reader accepts only printable ASCII in the strings and exactly this length. The broker checks
the member id and epoch of a ``TxnOffsetCommit`` as it does a consumer's own commit (KIP-447,
KIP-848): a member that left or was fenced is refused (``UNKNOWN_MEMBER_ID``), an epoch the
member does not have is refused (``ILLEGAL_GENERATION``); the producer then needs
``abort_transaction()``.
"""

from __future__ import annotations

import struct

from confluent_kafka import KafkaError

from consumer._client.errors import kafka_exception
from consumer.config import ConsumerConfig

__all__ = ["NO_MEMBER_EPOCH", "consumer_group_metadata", "group_metadata_bytes"]

_MAGIC = b"CGMDv2:"
#: The epoch (librdkafka: generation) of a consumer that is not a group member.
NO_MEMBER_EPOCH = -1


def group_metadata_bytes(
    group_id: str, member_id: str, member_epoch: int, group_instance_id: str | None
) -> bytes:
    """The CGMDv2 serialization librdkafka's reader accepts (see the module docstring).

    Raises ``KafkaException(_INVALID_ARG)`` when a string is not printable ASCII, which
    librdkafka's reader would refuse (``_BAD_MSG``) only inside ``send_offsets_to_transaction``.
    """
    parts = [_MAGIC, struct.pack("=i", member_epoch)]
    for name, value in (("group.id", group_id), ("member id", member_id)):
        parts.append(_c_string(name, value))
    if group_instance_id is None:
        parts.append(b"\x01")
    else:
        parts += [b"\x00", _c_string("group.instance.id", group_instance_id)]
    return b"".join(parts)


def consumer_group_metadata(config: ConsumerConfig, member_id: str | None, epoch: int) -> bytes:
    """``Consumer.consumer_group_metadata()`` of a consumer configured with ``config``: its
    member's id and epoch, or (``member_id`` None: not subscribed) no member id and epoch -1."""
    if member_id is None:
        member_id, epoch = "", NO_MEMBER_EPOCH
    return group_metadata_bytes(config.group_id, member_id, epoch, config.group_instance_id)


def _c_string(name: str, value: str) -> bytes:
    if not (value.isascii() and value.isprintable()):
        raise kafka_exception(
            KafkaError._INVALID_ARG,
            f"{name} {value!r} cannot be carried in consumer group metadata: librdkafka's "
            "reader accepts printable ASCII only",
        )
    return value.encode("ascii") + b"\x00"
