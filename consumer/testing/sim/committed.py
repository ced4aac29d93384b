"""``FakeConsumer.committed()``: one OffsetFetch with the member's id and epoch, retried in
simulated time as the real consumer's background loop retries it."""

from __future__ import annotations

from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer.errors import error_for_code
from consumer.member import FetchCommittedOffsets, TopicPartition
from consumer.testing.sim.cluster import SimCluster
from consumer.testing.sim.runtime import NETWORK_EXCEPTION, SimRuntime

__all__ = ["fetch_committed"]

_STALE_MEMBER_EPOCH = 113
_OFFSET_INVALID = -1001
#: How long ``committed()`` waits when called without a timeout (as the real consumer).
_DEFAULT_TIMEOUT_MS = 60_000


def fetch_committed(
    cluster: SimCluster,
    group_id: str,
    runtime: SimRuntime | None,
    partitions: list[KafkaTopicPartition],
    timeout: float | None,
    backoff_ms: tuple[int, int],
) -> list[KafkaTopicPartition]:
    """The committed offsets of ``partitions`` (OFFSET_INVALID where none).

    Retriable errors and STALE_MEMBER_EPOCH are retried (``backoff_ms`` is the first and the
    largest backoff) until ``timeout`` seconds of simulated time; then the error is raised as the
    real consumer raises it (:func:`consumer.errors.error_for_code`).
    """
    wanted = tuple(TopicPartition(tp.topic, tp.partition) for tp in partitions)
    timeout_ms = _DEFAULT_TIMEOUT_MS if timeout is None or timeout < 0 else int(timeout * 1000)
    deadline_ms = cluster.clock.now_ms + timeout_ms
    wait_ms, max_wait_ms = backoff_ms
    coordinator = cluster.group(group_id)
    while True:
        epoch = 0 if runtime is None else runtime.member_epoch
        offsets, code = coordinator.fetch(
            FetchCommittedOffsets(
                request_id=0,
                group_id=group_id,
                member_id=runtime.member_id if runtime is not None and epoch > 0 else None,
                member_epoch=epoch if epoch > 0 else -1,
                partitions=wanted,
            )
        )
        if runtime is not None and runtime.faults.cut(cluster.clock.now_ms):
            code = NETWORK_EXCEPTION  # the request did not get through
        if not code:
            break
        error = error_for_code(code)
        retry = error.retriable or code == _STALE_MEMBER_EPOCH
        if not retry or cluster.clock.now_ms + wait_ms > deadline_ms:
            raise error
        cluster.advance(wait_ms)
        wait_ms = min(max_wait_ms, wait_ms * 2)
    result = []
    for tp in wanted:
        offset = offsets.get(tp)
        result.append(
            KafkaTopicPartition(
                tp.topic, tp.partition, _OFFSET_INVALID if offset is None else offset
            )
        )
    return result
