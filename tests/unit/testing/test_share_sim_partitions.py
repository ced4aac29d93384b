"""Simulated share-partitions: per-record states, delivery counts, locks and acknowledgements."""

from __future__ import annotations

import pytest

from consumer.share.acknowledgements import AcknowledgeType
from consumer.testing.sim import RecordState, ShareGroupSettings, SharePartitionsSim
from consumer.testing.sim.share_partitions import INVALID_RECORD_STATE
from consumer.testing.sim.topics import SimTopics

A = RecordState.AVAILABLE
Q = RecordState.ACQUIRED


def group(records: int = 5, **settings: object) -> SharePartitionsSim:
    topics = SimTopics()
    topics.create("t", 1)
    for i in range(records):
        topics.append("t", 0, None, f"v{i}".encode(), (), 0)
    config = {"start_offset_reset": "earliest", "record_lock_duration_ms": 1_000, **settings}
    return SharePartitionsSim(topics, ShareGroupSettings(**config))  # type: ignore[arg-type]


def offsets(acquired: list[tuple[object, int]]) -> list[tuple[int, int]]:
    return [(record.offset, count) for record, count in acquired]  # type: ignore[attr-defined]


def test_acquisition_is_bounded_and_counts_deliveries() -> None:
    shares = group()
    assert offsets(shares.acquire("m1", "t", 0, 2, 0)) == [(0, 1), (1, 1)]
    assert offsets(shares.acquire("m2", "t", 0, 10, 0)) == [(2, 1), (3, 1), (4, 1)]
    assert shares.acquire("m1", "t", 0, 10, 0) == []
    sp = shares.partition("t", 0)
    assert sp.state(0) == (Q, 1)
    assert sp.holder(0) == "m1"
    assert sp.lock_deadline_ms(0) == 1_000


def test_accept_release_reject_and_renew() -> None:
    shares = group(records=4)
    shares.acquire("m1", "t", 0, 4, 0)
    sp = shares.partition("t", 0)
    assert shares.acknowledge("m1", "t", 0, 0, AcknowledgeType.ACCEPT, 10) is None
    assert shares.acknowledge("m1", "t", 0, 1, AcknowledgeType.RELEASE, 10) is None
    assert shares.acknowledge("m1", "t", 0, 2, AcknowledgeType.REJECT, 10) is None
    assert shares.acknowledge("m1", "t", 0, 3, AcknowledgeType.RENEW, 900) is None
    assert sp.state(0) == (RecordState.ACKNOWLEDGED, 1)
    assert sp.state(1) == (A, 1)
    assert sp.state(2) == (RecordState.ARCHIVED, 1)
    assert sp.lock_deadline_ms(3) == 1_900
    # The released record is delivered again with count 2; the renewed one is still held.
    assert offsets(shares.acquire("m2", "t", 0, 10, 1_500)) == [(1, 2)]
    assert sp.state(3) == (Q, 1)


def test_acknowledging_a_record_one_does_not_hold_fails_with_invalid_record_state() -> None:
    shares = group(records=2)
    shares.acquire("m1", "t", 0, 1, 0)
    assert shares.acknowledge("m2", "t", 0, 0, AcknowledgeType.ACCEPT, 1) == INVALID_RECORD_STATE
    assert shares.acknowledge("m1", "t", 0, 1, AcknowledgeType.ACCEPT, 1) == INVALID_RECORD_STATE
    assert shares.acknowledge("m1", "t", 0, 0, AcknowledgeType.ACCEPT, 1) is None
    assert shares.acknowledge("m1", "t", 0, 0, AcknowledgeType.ACCEPT, 1) == INVALID_RECORD_STATE


def test_lock_expiry_makes_the_record_available_and_a_late_accept_fails() -> None:
    shares = group(records=1)
    shares.acquire("m1", "t", 0, 1, 0)
    assert shares.next_lock_deadline_ms() == 1_000
    assert shares.partition("t", 0).state(0) == (Q, 1)
    late = shares.acknowledge("m1", "t", 0, 0, AcknowledgeType.ACCEPT, 1_000)
    assert late == INVALID_RECORD_STATE
    assert offsets(shares.acquire("m2", "t", 0, 1, 1_000)) == [(0, 2)]


def test_the_delivery_count_limit_archives_a_record_on_release_or_expiry() -> None:
    shares = group(records=2, delivery_count_limit=2)
    now = 0
    for delivery in (1, 2):
        assert offsets(shares.acquire("m1", "t", 0, 2, now)) == [(0, delivery), (1, delivery)]
        shares.acknowledge("m1", "t", 0, 0, AcknowledgeType.RELEASE, now)
        now += 1_000  # offset 1's lock expires
    sp = shares.partition("t", 0)
    sp.expire(now)
    assert sp.state(0) == (RecordState.ARCHIVED, 2)
    assert sp.state(1) == (RecordState.ARCHIVED, 2)
    assert shares.acquire("m1", "t", 0, 2, now) == []


def test_closing_the_session_releases_what_the_member_holds() -> None:
    shares = group(records=3)
    shares.acquire("m1", "t", 0, 2, 0)
    shares.acquire("m2", "t", 0, 1, 0)
    shares.release_member("m1", 5)
    sp = shares.partition("t", 0)
    assert [sp.state(o) for o in range(3)] == [(A, 1), (A, 1), (Q, 1)]


def test_latest_starts_at_the_end_and_earliest_at_zero() -> None:
    latest = group(records=3, start_offset_reset="latest")
    assert latest.acquire("m", "t", 0, 10, 0) == []
    latest.topics.append("t", 0, None, b"new", (), 0)
    assert offsets(latest.acquire("m", "t", 0, 10, 0)) == [(3, 1)]
    assert offsets(group(records=2).acquire("m", "t", 0, 10, 0)) == [(0, 1), (1, 1)]


def test_the_record_lock_cap_stops_acquisition() -> None:
    shares = group(records=5, max_record_locks=3)
    assert len(shares.acquire("m1", "t", 0, 10, 0)) == 3
    assert shares.acquire("m2", "t", 0, 10, 0) == []
    shares.acknowledge("m1", "t", 0, 0, AcknowledgeType.ACCEPT, 1)
    assert offsets(shares.acquire("m2", "t", 0, 10, 1)) == [(3, 1)]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"start_offset_reset": "by_duration:PT1H"}, "share.auto.offset.reset"),
        ({"delivery_count_limit": 0}, "share.delivery.count.limit"),
        ({"record_lock_duration_ms": -1}, "share.record.lock.duration.ms"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ShareGroupSettings(**settings)  # type: ignore[arg-type]
