"""Acknowledgement bookkeeping and wire batching (sans-I/O)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.share.acknowledgements import (
    AcknowledgementBatch,
    Acknowledgements,
    AcknowledgeType,
    TopicIdPartition,
    encode_acknowledgements,
)

A = AcknowledgeType.ACCEPT
R = AcknowledgeType.RELEASE
J = AcknowledgeType.REJECT
G = AcknowledgeType.GAP
N = AcknowledgeType.RENEW
TP = TopicIdPartition(uuid.UUID(int=1), 0)
OTHER = TopicIdPartition(uuid.UUID(int=1), 1)


def test_types_match_confluent_and_the_wire() -> None:
    assert [int(t) for t in (G, A, R, J, N)] == [0, 1, 2, 3, 4]
    assert not N.is_terminal
    assert all(t.is_terminal for t in (G, A, R, J))


def test_contiguous_same_type_offsets_merge_into_one_range() -> None:
    assert encode_acknowledgements({5: A, 3: A, 4: A, 9: A}) == (
        AcknowledgementBatch(3, 5, (A,)),
        AcknowledgementBatch(9, 9, (A,)),
    )


def test_contiguous_mixed_types_get_one_type_per_offset() -> None:
    assert encode_acknowledgements({1: A, 2: G, 3: R, 4: J}) == (
        AcknowledgementBatch(1, 4, (A, G, R, J)),
    )


@given(st.dictionaries(st.integers(0, 200), st.sampled_from(list(AcknowledgeType)), max_size=60))
def test_encoding_keeps_every_offset_and_type(acks: dict[int, AcknowledgeType]) -> None:
    batches = encode_acknowledgements(acks)
    decoded = {offset: b.type_at(offset) for b in batches for offset in b.offsets()}
    assert decoded == acks
    # Sorted, non-overlapping, non-adjacent (adjacent ranges would have been merged).
    for before, after in zip(batches, batches[1:], strict=False):
        assert before.last_offset + 1 < after.first_offset


def test_a_batch_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError, match="empty or negative"):
        AcknowledgementBatch(5, 4, (A,))
    with pytest.raises(ValueError, match="needs 1 type or 3"):
        AcknowledgementBatch(1, 3, (A, R))
    with pytest.raises(ValueError, match="outside"):
        AcknowledgementBatch(1, 3, (A,)).type_at(4)


def test_take_returns_batches_per_partition_and_clears_them() -> None:
    acks = Acknowledgements()
    acks.add_all(TP, [0, 1, 2], A)
    acks.add(OTHER, 7, R)
    assert len(acks) == 4
    assert acks.pending_partitions() == {TP, OTHER}
    assert acks.take([TP]) == {TP: (AcknowledgementBatch(0, 2, (A,)),)}
    assert acks.pending_partitions() == {OTHER}
    assert acks.take() == {OTHER: (AcknowledgementBatch(7, 7, (R,)),)}
    assert acks.take() == {}
    assert len(acks) == 0


def test_a_second_terminal_acknowledgement_is_refused_until_sent() -> None:
    acks = Acknowledgements()
    acks.add(TP, 4, A)
    with pytest.raises(ValueError, match="already acknowledged"):
        acks.add(TP, 4, J)
    acks.take()
    acks.add(TP, 4, A)  # a redelivery of offset 4 is a new delivery
    assert acks.take() == {TP: (AcknowledgementBatch(4, 4, (A,)),)}


def test_renew_then_a_terminal_type_is_allowed_and_replaces_it() -> None:
    acks = Acknowledgements()
    acks.add(TP, 1, N)
    assert acks.has_renew()
    assert acks.has_renew([TP])
    assert not acks.has_renew([OTHER])
    acks.add(TP, 1, N)
    acks.add(TP, 1, R)
    assert not acks.has_renew()
    assert acks.take() == {TP: (AcknowledgementBatch(1, 1, (R,)),)}


def test_forget_drops_pending_and_finished_state() -> None:
    acks = Acknowledgements()
    acks.add_all(TP, [1, 2, 3], A)
    acks.forget(TP, [2])
    acks.add(TP, 2, R)
    assert acks.take() == {TP: (AcknowledgementBatch(1, 3, (A, R, A)),)}
    acks.add(TP, 5, A)
    acks.forget(TP)
    assert acks.take() == {}
    with pytest.raises(ValueError, match="offset must be >= 0"):
        acks.add(TP, -1, A)
