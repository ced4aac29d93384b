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


def test_a_range_is_recorded_whole_or_refused_whole() -> None:
    acks = Acknowledgements()
    acks.add_range(TP, 10, 14, A)
    acks.add(TP, 15, A)  # extends the run
    acks.add(TP, 20, N)
    with pytest.raises(ValueError, match="offset 10 of .* was already acknowledged"):
        acks.add_range(TP, 5, 12, R)
    acks.add_range(TP, 18, 20, J)  # a terminal type replaces the pending RENEW of 20
    with pytest.raises(ValueError, match="range 3..2 is empty"):
        acks.add_range(TP, 3, 2, A)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        acks.add_range(TP, -1, 2, A)
    assert len(acks) == 9
    assert acks.take() == {
        TP: (AcknowledgementBatch(10, 15, (A,)), AcknowledgementBatch(18, 20, (J,))),
    }
    acks.add_range(TP, 10, 20, R)  # everything sent may be acknowledged again (redelivered)
    assert acks.take() == {TP: (AcknowledgementBatch(10, 20, (R,)),)}


class _Reference:
    """The bookkeeping rules offset by offset, as plain dicts: what the runs must agree with."""

    def __init__(self) -> None:
        self.pending: dict[TopicIdPartition, dict[int, AcknowledgeType]] = {}
        self.finished: dict[TopicIdPartition, set[int]] = {}

    def add_range(self, tp: TopicIdPartition, first: int, last: int, kind: AcknowledgeType) -> bool:
        finished = self.finished.setdefault(tp, set())
        if any(offset in finished for offset in range(first, last + 1)):
            return False
        for offset in range(first, last + 1):
            self.pending.setdefault(tp, {})[offset] = kind
            if kind.is_terminal:
                finished.add(offset)
        return True

    def forget(self, tp: TopicIdPartition, offsets: list[int]) -> None:
        for offset in offsets:
            self.pending.get(tp, {}).pop(offset, None)
            self.finished.get(tp, set()).discard(offset)

    def take(self) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
        taken = {tp: encode_acknowledgements(acks) for tp, acks in self.pending.items() if acks}
        for tp, acks in self.pending.items():
            self.finished.get(tp, set()).difference_update(acks)
        self.pending = {}
        return taken


_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from([TP, OTHER]),
            st.integers(0, 40),
            st.integers(0, 4),
            st.sampled_from(list(AcknowledgeType)),
        ),
        st.tuples(st.just("forget"), st.sampled_from([TP, OTHER]), st.integers(0, 40)),
        st.tuples(st.just("take")),
    ),
    max_size=40,
)


@given(_steps)
def test_runs_agree_with_offset_by_offset_bookkeeping(steps: list[tuple[object, ...]]) -> None:
    acks, reference = Acknowledgements(), _Reference()
    for step in steps:
        if step[0] == "add":
            _, tp, first, extra, kind = step
            assert isinstance(tp, TopicIdPartition)
            assert isinstance(kind, AcknowledgeType)
            assert isinstance(first, int)
            assert isinstance(extra, int)
            if reference.add_range(tp, first, first + extra, kind):
                acks.add_range(tp, first, first + extra, kind)
            else:
                with pytest.raises(ValueError, match="already acknowledged"):
                    acks.add_range(tp, first, first + extra, kind)
        elif step[0] == "forget":
            _, tp, offset = step
            assert isinstance(tp, TopicIdPartition)
            assert isinstance(offset, int)
            acks.forget(tp, [offset])
            reference.forget(tp, [offset])
        else:
            assert acks.take() == reference.take()
        assert len(acks) == sum(len(p) for p in reference.pending.values())
        assert acks.has_renew() == any(
            AcknowledgeType.RENEW in p.values() for p in reference.pending.values()
        )
    assert acks.take() == reference.take()
