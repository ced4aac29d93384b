"""The KIP-848 case studies, run through GroupSim with listeners that record what they are told.

Unlike ``test_kip848_case_studies.py`` (heartbeat by heartbeat through the core), these run the
whole client stack of the testing kit (FakeConsumer, the real application-thread server, the
application's callbacks) and check the outcome the KIP describes, for several seeds.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer.testing.sim import FakeConsumer
from consumer.testing.sim.case_studies import CASE_STUDIES, CaseStudy, case_study
from consumer.testing.timeline_events import Fault, Ownership

SEEDS = (0, 1, 2)


class Listener:
    def __init__(self) -> None:
        self.owned: set[int] = set()
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def on_assign(self, consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append(("assign", tuple(tp.partition for tp in partitions)))
        assert not self.owned & {tp.partition for tp in partitions}, "assigned twice"
        self.owned |= {tp.partition for tp in partitions}

    def on_revoke(self, consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append(("revoke", tuple(tp.partition for tp in partitions)))
        self.owned -= {tp.partition for tp in partitions}

    def on_lost(self, consumer: FakeConsumer, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append(("lost", tuple(tp.partition for tp in partitions)))
        self.owned -= {tp.partition for tp in partitions}


@pytest.mark.parametrize("case", CASE_STUDIES, ids=lambda case: case.name)
@pytest.mark.parametrize("seed", SEEDS)
def test_case_study_follows_the_kip(case: CaseStudy, seed: int) -> None:
    result = case.run(seed=seed, listener=Listener)
    assert case.problems(result) == []
    assert result.ok


def test_joining_one_by_one_calls_each_listener_as_the_kip_moves_partitions() -> None:
    result = case_study("members_joining_one_by_one").run(listener=Listener)
    calls = [(c.member, c.callback, tuple(p for _, p, _ in c.partitions)) for c in result.callbacks]
    moves = [call for call in calls if call[2]]
    assert moves == [
        ("A", "on_assign", (0, 1, 2)),
        ("A", "on_revoke", (2,)),
        ("B", "on_assign", (2,)),
        ("A", "on_revoke", (1,)),
        ("C", "on_assign", (1,)),
    ]


def test_member_failure_hands_over_only_after_the_session_timeout() -> None:
    case = case_study("member_failure")
    result = case.run(listener=Listener)
    kill = next(e for e in result.timeline.events() if isinstance(e, Fault) and e.kind == "kill")
    taken = [
        e.owned_from_ms
        for e in result.timeline.events()
        if isinstance(e, Ownership) and e.member in ("B", "C") and e.partition in (0, 1)
    ]
    assert len(taken) == 2
    assert min(taken) >= kill.start_ms + case.session_timeout_ms
    assert not [c for c in result.callbacks if c.member == "A" and c.at_ms > kill.start_ms]


def test_problems_names_a_departure_from_the_kip() -> None:
    case = case_study("partition_added")
    result = case.run()
    assert case.problems(result) == []
    wrong = CaseStudy(
        name="wrong",
        summary="expects the wrong outcome",
        partitions=case.partitions,
        steps=case.steps,
        expected={"A": (0, 1), "B": ()},
        handovers=(("B", "A", 0),),
    )
    problems = wrong.problems(wrong.run())
    assert any("final assignment" in p for p in problems)
    assert any("did not move from B to A" in p for p in problems)


def test_unknown_case_study_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="members_joining_one_by_one"):
        case_study("nope")
