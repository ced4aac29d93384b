"""Exactly-once read-process-write with ``consumer.Consumer`` and confluent-kafka's transactional
``Producer``, against the real broker: offsets go into each transaction with
``consumer_group_metadata()`` (our member id and epoch), members join and leave meanwhile, and the
output read with ``isolation.level=read_committed`` holds every input exactly once. Metadata of a
member that has left, or with an epoch the member does not have, is refused by the broker.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from consumer._client.group_metadata import group_metadata_bytes
from tests.integration.consumer_support import make_producer, produce_numbered
from tests.integration.exactly_once_support import TransactionalStage as _Stage
from tests.integration.exactly_once_support import committed_output
from tests.support import wait_until

pytestmark = pytest.mark.integration

_RECORDS = 300
_PARTITIONS = 4
_TIMEOUT_S = 60.0


def _run_until(stages: list[_Stage], done: Any, what: str) -> None:
    def turn() -> bool:
        for stage in stages:
            stage.step()
        return bool(done())

    def details() -> str:
        return "\n".join(s.describe() for s in stages)

    wait_until(turn, _TIMEOUT_S, what, details, interval_s=0.0)


def test_members_joining_and_leaving_write_every_input_exactly_once(
    kafka_bootstrap: str, create_topic: Any, unique_name: Any
) -> None:
    source = create_topic(partitions=_PARTITIONS)
    sink = create_topic(partitions=1)
    producer = make_producer(kafka_bootstrap)
    third = _RECORDS // 3
    group = unique_name("eos")
    first = _Stage(kafka_bootstrap, group, source, sink)
    stages = [first]
    written = [first]

    def written_at_least(count: int) -> Any:
        return lambda: sum(stage.committed for stage in written) >= count

    try:
        # A third of the input for the first member alone; two more join and the next third
        # flows while the group rebalances; one leaves and the last third flows.
        produce_numbered(producer, source, 0, third, _PARTITIONS)
        _run_until(stages, written_at_least(third), f"{third} records written")
        joining = [_Stage(kafka_bootstrap, group, source, sink) for _ in range(2)]
        stages += joining
        written += joining
        leaving = joining[0]
        _run_until(
            stages,
            lambda: (
                sum(len(s.consumer.assignment()) for s in stages) == _PARTITIONS
                and all(s.consumer.assignment() for s in stages)
            ),
            "the partitions spread over the three members",
        )
        produce_numbered(producer, source, third, third, _PARTITIONS)
        _run_until(
            stages,
            lambda: written_at_least(2 * third)() and all(s.committed for s in joining),
            f"{2 * third} records written, some by each new member",
        )
        stages.remove(leaving)
        leaving.close()
        produce_numbered(producer, source, 2 * third, _RECORDS - 2 * third, _PARTITIONS)
        _run_until(stages, written_at_least(_RECORDS), f"{_RECORDS} records written")
        output = Counter(committed_output(kafka_bootstrap, sink))
    finally:
        for stage in stages:
            stage.close()

    assert set(output) == set(range(_RECORDS)), (
        f"missing: {sorted(set(range(_RECORDS)) - set(output))}"
    )
    assert [v for v, n in output.items() if n > 1] == [], "duplicates in the committed output"


def test_metadata_of_a_member_that_left_or_of_another_epoch_is_refused(
    kafka_bootstrap: str, create_topic: Any, unique_name: Any
) -> None:
    source = create_topic(partitions=1)
    sink = create_topic(partitions=1)
    group = unique_name("eos-fenced")
    stage = _Stage(kafka_bootstrap, group, source, sink)
    zombie = _Stage(kafka_bootstrap, group, source, sink)
    try:
        _run_until(
            [stage, zombie],
            lambda: stage.consumer.member_epoch > 0 and zombie.consumer.member_epoch > 0,
            "two members with epochs",
        )
        stale = zombie.consumer.consumer_group_metadata()
        zombie.close()
        # The partition is the remaining member's, at its current epoch, before it commits.
        _run_until([stage], lambda: stage.consumer.assignment(), "the partition reassigned")
        current = stage.consumer.consumer_group_metadata()
        member_id, epoch = stage.consumer.memberid() or "", stage.consumer.member_epoch
        wrong_epoch = group_metadata_bytes(group, member_id, epoch + 5, None)
        offsets = [TopicPartition(source, 0, 0)]
        for metadata, code in (
            (stale, KafkaError.UNKNOWN_MEMBER_ID),
            (wrong_epoch, KafkaError.ILLEGAL_GENERATION),
        ):
            stage.producer.begin_transaction()
            with pytest.raises(KafkaException) as caught:
                stage.producer.send_offsets_to_transaction(offsets, metadata, 30)
            error = caught.value.args[0]
            assert error.code() == code, error
            assert error.txn_requires_abort(), error
            stage.producer.abort_transaction(30)
        stage.producer.begin_transaction()
        stage.producer.send_offsets_to_transaction(offsets, current, 30)
        stage.producer.commit_transaction(30)
    finally:
        stage.close()
