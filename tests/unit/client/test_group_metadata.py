"""``consumer_group_metadata()`` bytes against librdkafka's own writer and reader (no broker:
the reader runs inside ``Producer.send_offsets_to_transaction`` before anything is sent)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException, Producer

from consumer import Consumer
from consumer._client.group_metadata import group_metadata_bytes

_NOWHERE = "127.0.0.1:1"


@pytest.fixture
def producer() -> Iterator[Producer]:
    made = Producer({"bootstrap.servers": _NOWHERE})
    yield made
    made.flush(0)


def _read_by_librdkafka(producer: Producer, metadata: bytes) -> KafkaError:
    """The error ``send_offsets_to_transaction`` raises: ``_BAD_MSG`` when librdkafka's reader
    refuses ``metadata``, ``_NOT_CONFIGURED`` (no transactional.id) once it has parsed them."""
    with pytest.raises(KafkaException) as caught:
        producer.send_offsets_to_transaction([], metadata, 1)
    error = caught.value.args[0]
    assert isinstance(error, KafkaError)
    return error


@pytest.mark.parametrize("instance", [None, "inst-1"])
def test_a_non_member_matches_librdkafkas_writer_byte_for_byte(instance: str | None) -> None:
    config = {"group.id": "grp-1", "bootstrap.servers": _NOWHERE}
    if instance is not None:
        config["group.instance.id"] = instance
    theirs = ConfluentConsumer(config)
    ours = Consumer(config)
    try:
        assert ours.consumer_group_metadata() == theirs.consumer_group_metadata()
    finally:
        theirs.close()
        ours.close()


@pytest.mark.parametrize("instance", [None, "inst-1"])
def test_a_members_metadata_is_read_by_librdkafka(producer: Producer, instance: str | None) -> None:
    metadata = group_metadata_bytes("grp-1", "8hJ7FO69QZOs0t9RenKkCg", 7, instance)
    assert metadata[7:11] == struct.pack("=i", 7)
    assert _read_by_librdkafka(producer, metadata).code() == KafkaError._NOT_CONFIGURED


def test_librdkafkas_reader_refuses_a_damaged_copy(producer: Producer) -> None:
    metadata = group_metadata_bytes("grp-1", "m", 3, None)
    assert _read_by_librdkafka(producer, metadata + b"x").code() == KafkaError._BAD_MSG


def test_a_string_librdkafka_cannot_read_is_refused_here() -> None:
    with pytest.raises(KafkaException, match="group.id") as caught:
        group_metadata_bytes("gruppe-ä", "m", 3, None)
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG


def test_a_closed_consumer_raises_runtime_error() -> None:
    ours = Consumer({"group.id": "g", "bootstrap.servers": _NOWHERE})
    ours.close()
    with pytest.raises(RuntimeError, match="closed"):
        ours.consumer_group_metadata()
