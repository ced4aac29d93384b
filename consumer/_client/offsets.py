"""The offsets side of :class:`~consumer.Consumer`: ``store_offsets()``, ``commit()``,
``committed()`` and the consumed offsets ``poll()`` reports to the member.

:class:`OffsetBook` runs on the application thread. Commits go to the member as
``CommitRequested`` events; ``committed()`` goes to the background loop as a
:class:`~consumer._bridge.messages.FetchCommitted` request whose reply future it waits on.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping

from confluent_kafka import OFFSET_INVALID, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.handle import RuntimeHandle
from consumer._bridge.last_poll import monotonic_ms
from consumer._bridge.messages import AppEvent, FetchCommitted
from consumer._bridge.queues import ToBackground
from consumer._client.app_thread import AppThreadServer, CommitWaiter
from consumer._client.commits import (
    COMMIT_REPORT_GRACE_S,
    commit_failed,
    commit_outcome,
    nothing_to_commit,
    offsets_named,
    offsets_reported,
    refuse_foreign,
    sync_commit_timeout_ms,
)
from consumer._client.dataplane import DataPlane
from consumer._client.errors import ConsumerKafkaException, kafka_exception
from consumer.config import ConsumerConfig
from consumer.errors import KafkaConnectionError
from consumer.member import (
    CommitRequested,
    ConsumedOffsetsReported,
    ReportCommitResult,
    TopicPartition,
)

__all__ = ["COMMITTED_DEFAULT_TIMEOUT_S", "OffsetBook", "offsets_to_commit"]

#: How long ``committed()`` waits when called without a timeout (or a negative one).
COMMITTED_DEFAULT_TIMEOUT_S = 60.0
#: How much longer than its own timeout ``committed()`` waits for the loop's reply.
_COMMITTED_REPLY_GRACE_S = 1.0


class OffsetBook:
    """Stored offsets, commits and committed-offset lookups of one consumer."""

    def __init__(
        self,
        config: ConsumerConfig,
        dataplane: DataPlane,
        to_background: ToBackground[AppEvent],
    ) -> None:
        self._config = config
        self._dataplane = dataplane
        self._to_background = to_background
        self._tokens = itertools.count(1)
        self._stored: dict[TopicPartition, int] = {}

    def consumed(
        self,
        partitions: Iterable[TopicPartition],
        positions_of: Callable[[Iterable[tuple[str, int]]], Mapping[tuple[str, int], int]]
        | None = None,
    ) -> dict[TopicPartition, int]:
        """Next offset to read per partition: positions, or stored offsets when storing by hand.

        ``positions_of`` replaces the data plane's positions (``AppThreadServer.positions``
        also knows those of partitions whose ``on_revoke`` is running).
        """
        wanted = list(partitions)
        if not self._config.enable_auto_offset_store:
            return {tp: self._stored[tp] for tp in wanted if tp in self._stored}
        keys = ((tp.topic, tp.partition) for tp in wanted)
        positions = (positions_of or self._dataplane.positions)(keys)
        return {TopicPartition(t, p): offset for (t, p), offset in positions.items()}

    def report_consumed(self, owned: Iterable[TopicPartition]) -> None:
        """Tell the member the consumed offsets of ``owned`` (before leaving or closing)."""
        consumed = self.consumed(owned)
        if consumed:
            self._to_background.put(ConsumedOffsetsReported(consumed))

    def store(
        self,
        message: Message | None,
        offsets: list[KafkaTopicPartition] | None,
        assigned_now: Callable[[], Collection[TopicPartition]],
    ) -> None:
        """``store_offsets()``: remember offsets of assigned partitions for the next commit."""
        if self._config.enable_auto_offset_store:
            raise kafka_exception(
                KafkaError._INVALID_ARG,
                "store_offsets() needs enable.auto.offset.store=false",
            )
        if (message is None) == (offsets is None):
            raise ValueError("store_offsets() takes exactly one of message or offsets")
        if message is not None:
            key = TopicPartition(message.topic() or "", message.partition() or 0)
            chosen = {key: (message.offset() or 0) + 1}
        else:
            chosen = {TopicPartition(tp.topic, tp.partition): tp.offset for tp in offsets or ()}
        assigned = assigned_now()
        if any(tp not in assigned for tp in chosen):
            # As librdkafka: only partitions of the current assignment have a stored offset.
            raise kafka_exception(KafkaError._STATE, "StoreOffsets failed: Local: Erroneous state")
        self._stored.update(chosen)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop the stored offsets of partitions that left the assignment (as librdkafka)."""
        for tp in partitions:
            self._stored.pop(tp, None)

    def commit_in_background(
        self,
        server: AppThreadServer,
        chosen: Mapping[TopicPartition, int],
        on_result: Callable[[ReportCommitResult], None],
    ) -> int:
        """Send an asynchronous commit of ``chosen``; ``on_result`` gets its answer inside
        ``poll()``. Returns the commit's token (for :meth:`AppThreadServer.take_commit_result`)."""
        token = next(self._tokens)
        server.commit_waiters[token] = CommitWaiter(chosen, on_result)
        self._to_background.put(CommitRequested(token, dict(chosen)))
        return token

    def commit(
        self,
        server: AppThreadServer,
        message: Message | None,
        offsets: list[KafkaTopicPartition] | None,
        *,
        asynchronous: bool,
        start_runtime: Callable[[], object],
        last_poll_report_ms: int,
    ) -> list[KafkaTopicPartition] | None:
        """``commit()``: see :meth:`consumer.Consumer.commit`.

        ``start_runtime`` starts the background runtime if it is not running (a consumer that
        only assigns partitions commits without a group membership: member id "", epoch -1).
        ``last_poll_report_ms`` is when the member was last told the application polled
        (:func:`~consumer._bridge.last_poll.monotonic_ms` time); a synchronous commit returns
        before that report runs out.
        """
        on_commit = self._config.on_commit
        outcome: list[ReportCommitResult] = []

        def on_result(chosen: dict[TopicPartition, int], result: ReportCommitResult) -> None:
            outcome.append(result)
            if asynchronous and on_commit is not None:
                on_commit(*commit_outcome(chosen, result))

        if asynchronous:
            try:
                self.request_commit(server, message, offsets, None, start_runtime, on_result)
            except ConsumerKafkaException as refused:
                if refused.kafka_error.code() != KafkaError._NO_OFFSET:
                    raise
                report_nothing_to_commit(server, next(self._tokens), server.assigned(), on_commit)
            return None
        # A synchronous commit is retried only while the caller waits for it: once it gave up
        # (and perhaps consumed on), a late retry must not overwrite newer offsets.
        timeout_ms = sync_commit_timeout_ms(
            self._config.max_poll_interval_ms, last_poll_report_ms, monotonic_ms()
        )
        token, reported = self.request_commit(
            server, message, offsets, timeout_ms, start_runtime, on_result
        )
        timeout_s = timeout_ms / 1000
        if not server.take_commit_result(token, timeout_s + COMMIT_REPORT_GRACE_S):
            server.commit_waiters.pop(token, None)
            raise kafka_exception(KafkaError._TIMED_OUT, f"commit timed out after {timeout_s} s")
        error, partitions = commit_outcome(reported, outcome[0])
        if error is not None:
            raise commit_failed(error.code())
        return partitions

    def request_commit(
        self,
        server: AppThreadServer,
        message: Message | None,
        offsets: list[KafkaTopicPartition] | None,
        timeout_ms: int | None,
        start_runtime: Callable[[], object],
        on_result: Callable[[dict[TopicPartition, int], ReportCommitResult], None],
    ) -> tuple[int, dict[TopicPartition, int]]:
        """Check and send one commit (retried for ``timeout_ms``; ``None``: as an async one);
        ``on_result(offsets, result)`` runs when it is served. Returns its token and the offsets
        its result names (:func:`~consumer._client.commits.offsets_reported`).
        ``start_runtime`` starts the background runtime if needed (see :meth:`commit`)."""
        everything = message is None and offsets is None
        # Inside on_revoke the revoked partitions are still assigned (fetching has stopped):
        # their consumed offsets are committed too, as confluent-kafka's commit() does there.
        assigned = server.assigned()
        consumed = self.consumed(assigned, server.positions) if everything else {}
        chosen = offsets_named(message, offsets, consumed)
        if server.subscribed:
            refuse_foreign(chosen, assigned)
        start_runtime()
        token = next(self._tokens)
        reported = offsets_reported(chosen, assigned, everything=everything)
        server.commit_waiters[token] = CommitWaiter(chosen, functools.partial(on_result, reported))
        self._to_background.put(CommitRequested(token, dict(chosen), timeout_ms))
        return token, reported

    def committed(
        self,
        runtime: RuntimeHandle,
        partitions: list[KafkaTopicPartition],
        timeout: float | None,
    ) -> list[KafkaTopicPartition]:
        """``committed()``: one OffsetFetch (retried) by the background loop, awaited here."""
        wanted = tuple(TopicPartition(tp.topic, tp.partition) for tp in partitions)
        timeout_s = (
            COMMITTED_DEFAULT_TIMEOUT_S if timeout is None or timeout < 0 else float(timeout)
        )
        if runtime.finished:
            raise KafkaConnectionError("the consumer's background loop is not running")
        request = FetchCommitted(wanted, timeout_s)
        self._to_background.put(request)
        try:
            result = request.reply.result(timeout_s + _COMMITTED_REPLY_GRACE_S)
        except TimeoutError:
            raise kafka_exception(
                KafkaError._TIMED_OUT, f"committed() timed out after {timeout_s} s"
            ) from None
        return [
            KafkaTopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in zip(wanted, result, strict=True)
        ]


def _report_to(
    on_commit: Callable[..., object], offsets: dict[TopicPartition, int]
) -> Callable[[ReportCommitResult], None]:
    """A commit waiter's ``on_result`` that calls ``on_commit(err, partitions)``."""

    def on_result(result: ReportCommitResult) -> None:
        error, partitions = commit_outcome(offsets, result)
        on_commit(error, partitions)

    return on_result


def offsets_to_commit(
    server: AppThreadServer,
    token: int,
    message: Message | None,
    offsets: list[KafkaTopicPartition] | None,
    consumed: Mapping[TopicPartition, int],
    *,
    asynchronous: bool,
    on_commit: Callable[..., object] | None,
) -> dict[TopicPartition, int] | None:
    """:func:`~consumer._client.commits.offsets_named`, except that an asynchronous commit with
    nothing to commit returns None after :func:`report_nothing_to_commit`."""
    try:
        return offsets_named(message, offsets, consumed)
    except ConsumerKafkaException as refused:
        if not asynchronous or refused.kafka_error.code() != KafkaError._NO_OFFSET:
            raise
    report_nothing_to_commit(server, token, server.owned, on_commit)
    return None


def report_nothing_to_commit(
    server: AppThreadServer,
    token: int,
    partitions: Iterable[TopicPartition],
    on_commit: Callable[..., object] | None,
) -> None:
    """An asynchronous commit with nothing to commit: as confluent-kafka, ``on_commit`` gets
    ``_NO_OFFSET`` from the next ``poll()``, with ``partitions`` at ``OFFSET_INVALID``."""
    if on_commit is not None:
        at_invalid = dict.fromkeys(partitions, OFFSET_INVALID)
        server.commit_waiters[token] = CommitWaiter(at_invalid, _report_to(on_commit, at_invalid))
        server.to_application.put(nothing_to_commit(token, at_invalid))
