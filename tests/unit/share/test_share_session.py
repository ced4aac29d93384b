"""Share sessions: epochs, partition bookkeeping, resets and closing (sans-I/O)."""

from __future__ import annotations

import uuid

import pytest

from consumer.share.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
    TopicIdPartition,
)
from consumer.share.session import (
    FINAL_EPOCH,
    MAX_EPOCH,
    SessionBusyError,
    SessionOutcome,
    ShareSession,
    next_epoch,
    route_by_leader,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
P0 = TopicIdPartition(T1, 0)
P1 = TopicIdPartition(T1, 1)
Q0 = TopicIdPartition(T2, 0)
ACCEPT_3 = (AcknowledgementBatch(3, 3, (AcknowledgeType.ACCEPT,)),)
RENEW_4 = (AcknowledgementBatch(4, 4, (AcknowledgeType.RENEW,)),)


def opened(*partitions: TopicIdPartition) -> ShareSession:
    session = ShareSession(node_id=1)
    session.fetch(set(partitions))
    assert session.on_response(None) is SessionOutcome.ADVANCED
    return session


def test_epochs_count_up_from_zero_and_wrap_to_one() -> None:
    assert [next_epoch(e) for e in (0, 1, 41)] == [1, 2, 42]
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    with pytest.raises(ValueError, match="outside -1"):
        next_epoch(-2)


def test_the_first_fetch_is_full_at_epoch_zero_without_acknowledgements() -> None:
    session = ShareSession(node_id=3)
    assert not session.accepts_acknowledgements
    with pytest.raises(ValueError, match="epoch-0"):
        session.fetch({P0}, {P0: ACCEPT_3})
    plan = session.fetch({P0, Q0})
    assert (plan.node_id, plan.epoch) == (3, 0)
    assert plan.partitions == {P0: (), Q0: ()}
    assert plan.forgotten == frozenset()
    assert plan.wire_topics() == {T1: {0: ()}, T2: {0: ()}}
    assert session.on_response(None) is SessionOutcome.ADVANCED
    assert (session.epoch, session.partitions) == (1, {P0, Q0})


def test_incremental_fetches_send_new_and_acknowledged_partitions_and_forget_dropped() -> None:
    session = opened(P0, P1)
    plan = session.fetch({P1, Q0}, {P1: ACCEPT_3})
    assert plan.epoch == 1
    assert plan.partitions == {Q0: (), P1: ACCEPT_3}
    assert plan.acknowledgements == {P1: ACCEPT_3}
    assert plan.forgotten == {P0}
    assert plan.wire_forgotten() == {T1: [0]}
    session.on_response(None)
    assert (session.epoch, session.partitions) == (2, {P1, Q0})
    # Nothing changed: an empty incremental fetch.
    plan = session.fetch({P1, Q0})
    assert (plan.epoch, plan.partitions, plan.forgotten) == (2, {}, frozenset())


def test_a_dropped_partition_with_acknowledgements_sends_them_then_is_forgotten() -> None:
    session = opened(P0)
    plan = session.fetch(set(), {P0: ACCEPT_3})
    assert plan.partitions == {P0: ACCEPT_3}
    assert plan.forgotten == frozenset()
    session.on_response(None)
    plan = session.fetch(set())
    assert plan.forgotten == {P0}
    session.on_response(None)
    assert session.partitions == frozenset()


def test_one_request_at_a_time() -> None:
    session = opened(P0)
    session.fetch({P0})
    with pytest.raises(SessionBusyError, match="in flight"):
        session.acknowledge({P0: ACCEPT_3})
    with pytest.raises(SessionBusyError, match="in flight"):
        session.fetch({P0})
    session.on_response(None)
    with pytest.raises(RuntimeError, match="no request in flight"):
        session.on_response(None)


@pytest.mark.parametrize(
    "error",
    ["SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH", "SHARE_SESSION_LIMIT_REACHED"],
)
def test_session_errors_reset_to_a_full_fetch(error: str) -> None:
    session = opened(P0, P1)
    session.fetch({P0, P1}, {P0: ACCEPT_3})
    assert session.on_response(error) is SessionOutcome.RESET
    assert (session.epoch, session.partitions) == (0, frozenset())
    assert not session.accepts_acknowledgements
    plan = session.fetch({P0, P1})
    assert (plan.epoch, plan.partitions) == (0, {P0: (), P1: ()})


def test_other_errors_still_advance_the_epoch() -> None:
    session = opened(P0)
    session.fetch({P0, P1})
    assert session.on_response("UNKNOWN_SERVER_ERROR") is SessionOutcome.ADVANCED
    assert session.epoch == 2
    assert session.partitions == {P0, P1}


def test_a_disconnect_resets_the_session() -> None:
    session = opened(P0)
    session.fetch({P0})
    assert session.on_disconnect() is SessionOutcome.RESET
    assert (session.epoch, session.in_flight) == (0, False)


def test_share_acknowledge_uses_the_same_epoch_sequence_but_not_epoch_zero() -> None:
    session = ShareSession(node_id=1)
    with pytest.raises(ValueError, match="epoch > 0"):
        session.acknowledge({P0: ACCEPT_3})
    session = opened(P0)
    plan = session.acknowledge({P0: ACCEPT_3 + RENEW_4})
    assert (plan.epoch, plan.is_renew_ack) == (1, True)
    assert plan.wire_topics() == {T1: {0: ACCEPT_3 + RENEW_4}}
    session.on_response(None)
    assert (session.epoch, session.partitions) == (2, {P0})
    assert session.fetch({P0}).epoch == 2


def test_renew_acknowledgements_mark_the_fetch() -> None:
    session = opened(P0)
    assert session.fetch({P0}, {P0: RENEW_4}).is_renew_ack


def test_close_sends_epoch_minus_one_once() -> None:
    session = opened(P0)
    plan = session.close({P0: ACCEPT_3})
    assert plan is not None
    assert (plan.epoch, plan.acknowledgements) == (FINAL_EPOCH, {P0: ACCEPT_3})
    assert session.on_response(None) is SessionOutcome.CLOSED
    assert session.closed
    with pytest.raises(SessionBusyError, match="closed"):
        session.fetch({P0})


def test_closing_a_session_never_opened_sends_nothing() -> None:
    session = ShareSession(node_id=1)
    assert session.close() is None
    assert session.closed


def test_a_disconnect_while_closing_ends_the_session() -> None:
    session = opened(P0)
    session.close()
    assert session.on_disconnect() is SessionOutcome.CLOSED


def test_partitions_are_routed_to_their_leaders() -> None:
    by_node, unknown = route_by_leader([P0, P1, Q0], {P0: 1, P1: 2, Q0: -1})
    assert by_node == {1: {P0}, 2: {P1}}
    assert unknown == {Q0}
    assert route_by_leader([P0], {}) == ({}, frozenset({P0}))
