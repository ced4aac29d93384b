"""The share data plane (:class:`consumer._share_runtime.dataplane.ShareDataPlane`) against a
scripted cluster: acknowledgement outcomes on every path (piggybacked, commit, close), session
loss (session errors and disconnects fail in-flight and queued acknowledgements, nothing rides on
an epoch-0 fetch, records of the lost session cannot be acknowledged), leader moves (hinted or
looked up), metadata refreshes and surfaced partition errors."""

from __future__ import annotations

import pytest
from share_scripted_cluster import (
    P0,
    P1,
    TOPIC,
    Rig,
    ScriptedCluster,
    acknowledged,
    eventually,
    fetched,
    part,
)

from consumer._share_runtime.events import RecordSource
from consumer._wire import BrokerAddress, LeaderHint
from consumer.errors import KafkaConnectionError
from consumer.share.acknowledgements import AcknowledgeType
from consumer.share.session import INITIAL_EPOCH

pytestmark = pytest.mark.asyncio

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_ID = 100
TOPIC_AUTHORIZATION_FAILED = 29
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122


def source_of(rig: Rig, offset: int, partition: object = P0) -> RecordSource:
    (record,) = [r for r in rig.delivered if r.record.offset == offset and r.partition == partition]
    return record.source


async def started(cluster: ScriptedCluster, *partitions: object) -> Rig:
    rig = Rig(cluster)
    await rig.plane.assign(partitions or (P0,))  # type: ignore[arg-type]
    return rig


async def test_piggybacked_acknowledgements_report_applied_and_refused_offsets() -> None:
    cluster = ScriptedCluster({P0: 1, P1: 1})
    cluster.script_fetch(1, fetched(part(P0, [0, 1, 2]), part(P1, [5])))
    rig = await started(cluster, P0, P1)
    await eventually(lambda: len(rig.delivered) == 4, "four records delivered")
    rig.plane.acknowledge(
        [
            (P0, 0, ACCEPT, source_of(rig, 0)),
            (P0, 1, RELEASE, source_of(rig, 1)),
            (P1, 5, ACCEPT, source_of(rig, 5, P1)),
        ]
    )
    cluster.script_fetch(1, fetched(part(P0), part(P1, acknowledge_error=INVALID_RECORD_STATE)))
    await eventually(lambda: len(rig.reports) == 2, "two outcomes")
    assert sorted(rig.outcomes(), key=str) == sorted(
        [
            ({(TOPIC, 0): frozenset({0, 1})}, None),
            ({(TOPIC, 1): frozenset({5})}, "INVALID_RECORD_STATE"),
        ],
        key=str,
    )
    carried = [plan for plan in cluster.fetches_to(1) if plan.acknowledgements]
    assert len(carried) == 1
    assert set(carried[0].acknowledgements) == {P0, P1}
    await rig.plane.close()


async def test_a_session_error_fails_in_flight_and_queued_acks_and_the_old_records() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, [0, 1, 2, 3])))
    rig = await started(cluster)
    await eventually(lambda: len(rig.delivered) == 4, "records delivered")
    cluster.script_fetch(1, fetched(error=SHARE_SESSION_NOT_FOUND))
    rig.plane.acknowledge([(P0, 0, ACCEPT, source_of(rig, 0))])
    await eventually(lambda: rig.reports, "the in-flight ack failed")
    assert rig.outcomes() == [({(TOPIC, 0): frozenset({0})}, "SHARE_SESSION_NOT_FOUND")]
    # A record of the lost session cannot be acknowledged any more: it fails at once, unsent.
    sent_before = len(cluster.fetches)
    rig.plane.acknowledge([(P0, 1, ACCEPT, source_of(rig, 1))])
    assert rig.outcomes()[-1] == ({(TOPIC, 0): frozenset({1})}, "SHARE_SESSION_NOT_FOUND")
    await eventually(lambda: len(cluster.fetches) > sent_before + 2, "fetching went on")
    reopened = [plan for plan in cluster.fetches_to(1)[1:] if plan.epoch == INITIAL_EPOCH]
    assert reopened, "the next fetch opened a new session"
    assert all(not plan.acknowledgements for plan in reopened), "no ack on an epoch-0 fetch"
    assert not any(
        1 in batch.offsets()
        for _, plan in cluster.fetches
        for batch in plan.acknowledgements.get(P0, ())
    ), "the lost session's record was never acknowledged"
    await rig.plane.close()


async def test_a_disconnect_fails_in_flight_and_queued_acks_and_refreshes_leaders() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, [0, 1])))
    rig = await started(cluster)
    await eventually(lambda: len(rig.delivered) == 2, "records delivered")
    lookups = cluster.lookups
    cluster.script_fetch(1, KafkaConnectionError("connection to node 1 closed"))
    rig.plane.acknowledge([(P0, 0, ACCEPT, source_of(rig, 0))])
    await eventually(lambda: rig.reports, "the in-flight ack failed")
    assert rig.outcomes() == [({(TOPIC, 0): frozenset({0})}, "KafkaConnectionError")]
    await eventually(lambda: cluster.lookups > lookups, "leaders looked up again")
    cluster.script_fetch(1, fetched(part(P0, [1], delivery_count=2)))
    await eventually(lambda: len(rig.delivered) == 3, "fetching resumed in a new session")
    assert rig.delivered[-1].source.generation == rig.delivered[0].source.generation + 1
    rig.plane.acknowledge([(P0, 1, ACCEPT, rig.delivered[-1].source)])
    await eventually(lambda: len(rig.reports) == 2, "the new delivery's ack went through")
    assert rig.outcomes()[-1] == ({(TOPIC, 0): frozenset({1})}, None)
    await rig.plane.close()


async def test_not_leader_with_a_hint_moves_the_partition_and_fails_its_acks() -> None:
    cluster = ScriptedCluster({P0: 1, P1: 1})
    cluster.script_fetch(1, fetched(part(P0, [0, 1]), part(P1, [7])))
    rig = await started(cluster, P0, P1)
    await eventually(lambda: len(rig.delivered) == 3, "records delivered")
    cluster.script_fetch(
        1,
        fetched(
            part(
                P0,
                error=NOT_LEADER_OR_FOLLOWER,
                acknowledge_error=NOT_LEADER_OR_FOLLOWER,
                leader=LeaderHint(2, 5),
            ),
            endpoints={2: BrokerAddress(2, "b2", 9092)},
        ),
    )
    rig.plane.acknowledge([(P0, 0, ACCEPT, source_of(rig, 0))])  # rides on the failing fetch
    await eventually(lambda: rig.reports, "the ack on the failing fetch failed")
    assert rig.outcomes() == [({(TOPIC, 0): frozenset({0})}, "NOT_LEADER_OR_FOLLOWER")]
    await eventually(lambda: rig.plane.leaders.get(P0) == 2, "P0 moved to node 2")
    await eventually(
        lambda: any(P0 in plan.partitions for plan in cluster.fetches_to(2)),
        "node 2's session fetches P0",
    )
    assert cluster.fetches_to(2)[0].epoch == INITIAL_EPOCH
    await eventually(
        lambda: any(P0 in plan.forgotten for plan in cluster.fetches_to(1)),
        "node 1's session forgets P0",
    )
    # A record acquired from the old leader fails at once; P1 still acknowledges normally.
    rig.plane.acknowledge(
        [(P0, 1, ACCEPT, source_of(rig, 1)), (P1, 7, ACCEPT, source_of(rig, 7, P1))]
    )
    await eventually(lambda: any(e is None for _, e in rig.outcomes()), "P1's ack applied")
    assert ({(TOPIC, 0): frozenset({1})}, "NOT_LEADER_OR_FOLLOWER") in rig.outcomes()
    assert ({(TOPIC, 1): frozenset({7})}, None) in rig.outcomes()
    assert cluster.lookups == 1, "the hint sufficed: no metadata lookup"
    await rig.plane.close()


async def test_not_leader_without_a_hint_looks_the_leader_up() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, [0])))
    rig = await started(cluster)
    await eventually(lambda: len(rig.delivered) == 1, "record delivered")
    cluster.leader_of[P0] = 2
    cluster.script_fetch(
        1,
        fetched(part(P0, error=NOT_LEADER_OR_FOLLOWER, acknowledge_error=NOT_LEADER_OR_FOLLOWER)),
    )
    rig.plane.acknowledge([(P0, 0, ACCEPT, source_of(rig, 0))])
    await eventually(lambda: rig.plane.leaders.get(P0) == 2, "the lookup found node 2")
    assert cluster.lookups == 2
    await eventually(lambda: any(P0 in p.partitions for p in cluster.fetches_to(2)), "node 2")
    assert [error for _, error in rig.outcomes()] == ["NOT_LEADER_OR_FOLLOWER"]
    await rig.plane.close()


async def test_unknown_topic_id_refreshes_metadata_and_keeps_fetching() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, error=UNKNOWN_TOPIC_ID)))
    rig = await started(cluster)
    await eventually(lambda: cluster.lookups >= 2, "metadata refreshed")
    cluster.script_fetch(1, fetched(part(P0, [3])))
    await eventually(lambda: len(rig.delivered) == 1, "fetching went on")
    assert rig.plane.leaders[P0] == 1
    await rig.plane.close()


async def test_topic_authorization_failure_is_surfaced() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, error=TOPIC_AUTHORIZATION_FAILED)))
    rig = await started(cluster)
    await eventually(lambda: rig.surfaced, "the error surfaced")
    assert rig.surfaced[0].name == "TOPIC_AUTHORIZATION_FAILED"  # type: ignore[attr-defined]
    await rig.plane.close()


async def test_commit_reports_per_partition_and_a_reset_fails_the_rest() -> None:
    cluster = ScriptedCluster({P0: 1, P1: 1})
    cluster.script_fetch(1, fetched(part(P0, [0, 1]), part(P1, [4])))
    rig = await started(cluster, P0, P1)
    await eventually(lambda: len(rig.delivered) == 3, "records delivered")
    cluster.script_ack(1, acknowledged({P0: 0, P1: INVALID_RECORD_STATE}))
    rig.plane.acknowledge(
        [(P0, 0, ACCEPT, source_of(rig, 0)), (P1, 4, ACCEPT, source_of(rig, 4, P1))]
    )
    result = await rig.plane.commit()
    assert {key: None if e is None else e.name for key, e in result.items()} == {  # type: ignore[attr-defined]
        (TOPIC, 0): None,
        (TOPIC, 1): "INVALID_RECORD_STATE",
    }
    assert sorted(rig.outcomes(), key=str) == sorted(
        [
            ({(TOPIC, 0): frozenset({0})}, None),
            ({(TOPIC, 1): frozenset({4})}, "INVALID_RECORD_STATE"),
        ],
        key=str,
    )
    cluster.script_ack(1, acknowledged({}, error=SHARE_SESSION_NOT_FOUND))
    rig.plane.acknowledge([(P0, 1, ACCEPT, source_of(rig, 1))])
    result = await rig.plane.commit()
    assert [e.name for e in result.values()] == ["SHARE_SESSION_NOT_FOUND"]  # type: ignore[union-attr]
    assert rig.outcomes()[-1] == ({(TOPIC, 0): frozenset({1})}, "SHARE_SESSION_NOT_FOUND")
    await rig.plane.close()


async def test_close_sends_final_acks_at_epoch_minus_one_and_reports_them() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, [0, 1])))
    rig = await started(cluster)
    await eventually(lambda: len(rig.delivered) == 2, "records delivered")
    rig.plane.acknowledge([(P0, 0, ACCEPT, source_of(rig, 0))])
    await rig.plane.close()
    closing = [plan for node, plan in cluster.acknowledges if plan.epoch == -1]
    assert len(closing) == 1
    assert [e for _, e in rig.outcomes()] == [None]
    assert {o for offsets, _ in rig.outcomes() for o in offsets[(TOPIC, 0)]} == {0}


async def test_gap_offsets_are_not_reported() -> None:
    cluster = ScriptedCluster({P0: 1})
    gap = part(P0, [0])
    gap = type(gap)(
        **{
            **{f: getattr(gap, f) for f in gap.__dataclass_fields__},
            "acquired": (type(gap.acquired[0])(0, 1, 1),),
        }
    )
    cluster.script_fetch(1, fetched(gap))
    rig = await started(cluster)
    await eventually(lambda: len(rig.delivered) == 1, "record delivered")
    rig.plane.acknowledge([(P0, 0, ACCEPT, source_of(rig, 0))])
    await eventually(lambda: rig.reports, "reported")
    assert rig.outcomes() == [({(TOPIC, 0): frozenset({0})}, None)]
    gap_batches = [b for plan in cluster.fetches_to(1) for b in plan.acknowledgements.get(P0, ())]
    assert any(AcknowledgeType.GAP in b.types for b in gap_batches), "offset 1 went as GAP"
    await rig.plane.close()


async def test_a_hint_naming_an_unknown_node_is_checked_against_metadata() -> None:
    cluster = ScriptedCluster({P0: 1})
    cluster.script_fetch(1, fetched(part(P0, [0])))
    rig = await started(cluster)
    await eventually(lambda: len(rig.delivered) == 1, "record delivered")
    cluster.leader_of[P0] = 3  # metadata knows node 3; the client's broker list does not
    cluster.script_fetch(
        1, fetched(part(P0, error=NOT_LEADER_OR_FOLLOWER, leader=LeaderHint(3, 9)))
    )
    await eventually(lambda: rig.plane.leaders.get(P0) == 3, "metadata named node 3")
    assert cluster.lookups == 2, "the unknown hinted node sent the client to metadata"
    await eventually(lambda: any(P0 in p.partitions for p in cluster.fetches_to(3)), "node 3")
    await rig.plane.close()
