"""What ``Consumer.commit()`` decides before and after the member does the work: which offsets a
call names, which of them the member may commit, how long a synchronous call waits, and how the
member's answer is reported in confluent-kafka's terms. Pure functions; no I/O, no threads."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from confluent_kafka import OFFSET_INVALID, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.errors import ConsumerKafkaException, kafka_exception
from consumer.member import ReportCommitResult, TopicPartition

#: How much longer than a synchronous commit's own deadline the caller waits for the member's
#: answer (the member reports a job at its deadline; this covers the hand-over between threads).
COMMIT_REPORT_GRACE_S = 1.0
#: A synchronous commit returns this long (at least) before the poll timer would run out.
SYNC_COMMIT_POLL_MARGIN_MS = 1_500
#: Bounds of a synchronous commit's wait (the upper one is Java's ``default.api.timeout.ms``).
SYNC_COMMIT_MIN_MS = 1_000
SYNC_COMMIT_MAX_MS = 60_000


def offsets_named(
    message: Message | None,
    offsets: list[KafkaTopicPartition] | None,
    consumed: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """The offsets a ``commit(message=..., offsets=...)`` call names (``consumed`` when neither);
    raises ``ValueError`` for contradictory arguments and ``_NO_OFFSET`` when nothing is left."""
    if message is not None and offsets is not None:
        raise ValueError("commit() takes message or offsets, not both")
    if message is not None:
        if message.error() is not None:
            raise ValueError("cannot commit a message that carries an error")
        topic, partition = message.topic() or "", message.partition() or 0
        chosen = {TopicPartition(topic, partition): (message.offset() or 0) + 1}
    elif offsets is not None:
        # As librdkafka: a logical offset (OFFSET_INVALID, OFFSET_BEGINNING, ...; all < 0) is
        # not a position, so it is never committed (it would reset the next owner).
        chosen = {
            TopicPartition(tp.topic, tp.partition): tp.offset for tp in offsets if tp.offset >= 0
        }
    else:
        chosen = dict(consumed)
    if not chosen:
        raise commit_failed(KafkaError._NO_OFFSET)
    return chosen


def offsets_reported(
    chosen: Mapping[TopicPartition, int],
    assigned: Collection[TopicPartition],
    *,
    everything: bool,
) -> dict[TopicPartition, int]:
    """The partitions a commit's result names: ``chosen``, and for a ``commit()`` of the
    consumed offsets (``everything``) also every other assigned partition, at
    ``OFFSET_INVALID`` (nothing consumed there, so nothing committed), as librdkafka reports a
    commit of its current assignment."""
    if not everything:
        return dict(chosen)
    return {**dict.fromkeys(assigned, OFFSET_INVALID), **chosen}


def commit_failed(code: int) -> ConsumerKafkaException:
    """A synchronous commit's failure as confluent-kafka raises it: ``KafkaException`` with the
    code (``_NO_OFFSET``, or the first partition's broker error) and ``Commit failed: <reason>``."""
    return kafka_exception(code, f"Commit failed: {KafkaError(code).str()}")


def nothing_to_commit(token: int, owned: Collection[TopicPartition]) -> ReportCommitResult:
    """What an asynchronous commit with nothing to commit reports to ``on_commit``, as
    confluent-kafka does: ``_NO_OFFSET`` for each owned partition (at ``OFFSET_INVALID``)."""
    return ReportCommitResult(token, dict.fromkeys(owned, KafkaError._NO_OFFSET))


def refuse_foreign(chosen: Collection[TopicPartition], owned: Collection[TopicPartition]) -> None:
    """Raise ``_STATE`` naming every partition in ``chosen`` the member does not own.

    Brokers accept such a commit from any current member, which would overwrite the new owner's
    progress: a revoked partition's offsets belong in ``on_revoke``, while it is still owned.
    """
    foreign = sorted(tp for tp in chosen if tp not in owned)
    if foreign:
        names = ", ".join(str(tp) for tp in foreign)
        raise kafka_exception(
            KafkaError._STATE,
            f"commit of partitions this member does not own: {names} (revoked, lost or "
            "never assigned); commit revoked partitions inside on_revoke",
        )


def sync_commit_timeout_ms(max_poll_interval_ms: int, last_poll_ms: int, now_ms: int) -> int:
    """How long a synchronous commit may wait: while the membership lasts without a poll.

    The member leaves the group when ``max.poll.interval.ms`` passes without a poll, and a
    commit blocks the polling thread. Waiting longer (as Java's ``commitSync`` does, up to
    ``default.api.timeout.ms``) turns a broker outage into a lost membership and redelivery;
    returning ``_TIMED_OUT`` a margin before the poll timer runs out keeps the member in the
    group, and the next commit carries the same offsets. ``last_poll_ms`` is when the member
    was last told the application polled (same clock as ``now_ms``).
    """
    margin_ms = max(SYNC_COMMIT_POLL_MARGIN_MS, max_poll_interval_ms // 10)
    left_ms = last_poll_ms + max_poll_interval_ms - margin_ms - now_ms
    return max(SYNC_COMMIT_MIN_MS, min(left_ms, SYNC_COMMIT_MAX_MS))


def commit_outcome(
    offsets: Mapping[TopicPartition, int], result: ReportCommitResult
) -> tuple[KafkaError | None, list[KafkaTopicPartition]]:
    """The member's answer as confluent-kafka reports it: the first error (confluent's
    ``TopicPartition.error`` is read-only from Python) and the partitions with their offsets."""
    partitions = []
    first_error: KafkaError | None = None
    for tp, offset in sorted(offsets.items()):
        code = result.partition_errors.get(tp, 0)
        if code and first_error is None:
            first_error = KafkaError(code)
        partitions.append(KafkaTopicPartition(tp.topic, tp.partition, offset))
    return first_error, partitions
