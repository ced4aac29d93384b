"""What ``Consumer.commit()`` decides around the member: the offsets a call names, partitions it
may not commit, how long a synchronous call waits, and how the answer is reported."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.commits import (
    commit_outcome,
    offsets_named,
    offsets_reported,
    refuse_foreign,
    sync_commit_timeout_ms,
)
from consumer.member import ReportCommitResult, TopicPartition

FOO_0, FOO_1 = TopicPartition("foo", 0), TopicPartition("foo", 1)


def test_the_wait_ends_a_margin_before_the_poll_timer() -> None:
    # 5 s poll interval, last poll 1 s ago: 5 - 1 - 1.5 (margin) = 2.5 s
    assert sync_commit_timeout_ms(5_000, last_poll_ms=99_000, now_ms=100_000) == 2_500
    # 60 s poll interval: the margin is a tenth of it
    assert sync_commit_timeout_ms(60_000, last_poll_ms=100_000, now_ms=100_000) == 54_000


def test_the_wait_is_capped_like_javas_default_api_timeout() -> None:
    assert sync_commit_timeout_ms(300_000, last_poll_ms=100_000, now_ms=100_000) == 60_000


def test_an_exhausted_poll_budget_still_allows_one_short_attempt() -> None:
    assert sync_commit_timeout_ms(5_000, last_poll_ms=90_000, now_ms=100_000) == 1_000


def test_offsets_named_by_each_form_of_the_call() -> None:
    consumed = {FOO_0: 7}
    assert offsets_named(None, None, consumed) == {FOO_0: 7}
    assert offsets_named(None, [KafkaTopicPartition("foo", 1, 3)], consumed) == {FOO_1: 3}
    with pytest.raises(ValueError, match="not both"):
        offsets_named(object(), [], consumed)  # type: ignore[arg-type]
    with pytest.raises(KafkaException) as nothing:
        offsets_named(None, None, {})
    assert nothing.value.args[0].code() == KafkaError._NO_OFFSET


def test_foreign_partitions_are_refused_by_name() -> None:
    refuse_foreign([FOO_0], owned={FOO_0, FOO_1})
    with pytest.raises(KafkaException, match=r"does not own: foo-1 \("):
        refuse_foreign([FOO_0, FOO_1], owned={FOO_0})


def test_the_first_partition_error_is_reported_with_every_partition() -> None:
    error, partitions = commit_outcome({FOO_1: 5, FOO_0: 4}, ReportCommitResult(1, {FOO_1: 27}))
    assert error is not None
    assert error.code() == 27
    assert [(tp.partition, tp.offset) for tp in partitions] == [(0, 4), (1, 5)]
    error, _ = commit_outcome({FOO_0: 4}, ReportCommitResult(1, {}))
    assert error is None


def test_logical_offsets_are_never_committed() -> None:
    # position() of a partition without a position is OFFSET_INVALID (-1001): committing it
    # would make the next owner start from auto.offset.reset, so (as librdkafka) it is dropped.
    mixed = [KafkaTopicPartition("t", 0, -1001), KafkaTopicPartition("t", 1, 7)]
    assert offsets_named(None, mixed, {}) == {TopicPartition("t", 1): 7}
    with pytest.raises(KafkaException) as raised:
        offsets_named(None, [KafkaTopicPartition("t", 0, -1001)], {})
    assert raised.value.args[0].code() == KafkaError._NO_OFFSET


def test_a_commit_of_the_consumed_offsets_names_every_assigned_partition() -> None:
    assigned = [FOO_0, FOO_1, TopicPartition("foo", 2)]
    chosen = {FOO_1: 3}

    # As librdkafka: the partitions without a position come back at OFFSET_INVALID.
    assert offsets_reported(chosen, assigned, everything=True) == {
        FOO_0: OFFSET_INVALID,
        FOO_1: 3,
        TopicPartition("foo", 2): OFFSET_INVALID,
    }
    # Offsets named by the call are reported as they are.
    assert offsets_reported(chosen, assigned, everything=False) == {FOO_1: 3}
