"""The rules tables' keys hash by identity (``KeyEnum``), with an enum's equality and pickling."""

from __future__ import annotations

import pickle

import pytest

from consumer.member.machine import KeyEnum
from consumer.member.rules import Effect, Guard, Outcome, RoundKind, RoundPhase, Skip
from consumer.member.states import Heartbeats, MemberState
from consumer.share.rules import (
    ShareEffect,
    ShareGuard,
    ShareOutcome,
    ShareRoundKind,
    ShareRoundPhase,
)
from consumer.share.states import ShareState

TABLE_KEYS = [
    MemberState,
    Heartbeats,
    Outcome,
    Guard,
    Effect,
    RoundKind,
    RoundPhase,
    Skip,
    ShareState,
    ShareOutcome,
    ShareGuard,
    ShareEffect,
    ShareRoundKind,
    ShareRoundPhase,
]


@pytest.mark.parametrize("kind", TABLE_KEYS, ids=lambda kind: kind.__name__)
def test_table_keys_hash_by_identity(kind: type[KeyEnum]) -> None:
    assert issubclass(kind, KeyEnum)
    for member in kind:
        # enum.Enum's own __hash__ is hash(name): a Python call on every dict or set lookup.
        assert hash(member) == object.__hash__(member)
        assert pickle.loads(pickle.dumps(member)) is member
        assert {member: 1}[kind(member.value)] == 1
    assert len(set(kind)) == len(list(kind))


def test_members_of_different_tables_stay_apart() -> None:
    keys = {MemberState.STABLE: "consumer", ShareState.STABLE: "share"}
    assert keys[MemberState.STABLE] == "consumer"
    assert keys[ShareState.STABLE] == "share"
    assert MemberState.STABLE != ShareState.STABLE
