"""The offset calls of :class:`~consumer.testing.sim.FakeConsumer`: ``commit()`` (with the member
epoch, through the simulated member), ``store_offsets()``, ``committed()`` (an OffsetFetch on the
simulated cluster) and ``position()``, with the real consumer's arguments, errors and results (the
same helpers as :mod:`consumer._client.commits`)."""

from __future__ import annotations

import itertools

from confluent_kafka import KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._bridge.messages import AppEvent
from consumer._bridge.queues import ToBackground
from consumer._client.app_thread import AppThreadServer, CommitWaiter
from consumer._client.commits import (
    commit_failed,
    commit_outcome,
    offsets_reported,
    refuse_foreign,
    sync_commit_timeout_ms,
)
from consumer._client.errors import kafka_exception
from consumer._client.offsets import OffsetBook, offsets_to_commit
from consumer.config import ConsumerConfig
from consumer.member import CommitRequested, ReportCommitResult
from consumer.testing.sim.cluster import SimCluster
from consumer.testing.sim.committed import fetch_committed
from consumer.testing.sim.runtime import SimRuntime

__all__ = ["FakeOffsetMethods"]

_OFFSET_INVALID = -1001


class FakeOffsetMethods:
    """Mixed into :class:`~consumer.testing.sim.FakeConsumer` (same methods as the real one)."""

    _cluster: SimCluster
    _config: ConsumerConfig
    _server: AppThreadServer
    _offsets: OffsetBook
    _to_background: ToBackground[AppEvent]
    _tokens: itertools.count[int]
    _last_poll_ms: int
    runtime: SimRuntime | None

    def _check_open(self) -> None:  # pragma: no cover - FakeConsumer defines it
        raise NotImplementedError

    def _now_ms(self) -> int:  # pragma: no cover - FakeConsumer defines it
        raise NotImplementedError

    def _ensure_runtime(self) -> SimRuntime:  # pragma: no cover - FakeConsumer defines it
        raise NotImplementedError

    def commit(
        self,
        message: Message | None = None,
        offsets: list[KafkaTopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[KafkaTopicPartition] | None:
        """Commit offsets with the member epoch (those consumed so far when none are given).

        Synchronous commits return the partitions and raise on a failure; asynchronous results
        go to ``on_commit(err, partitions)`` from a later ``poll()``.
        """
        self._check_open()
        server = self._server
        everything = message is None and offsets is None
        consumed = self._offsets.consumed(server.assigned(), server.positions) if everything else {}
        token = next(self._tokens)
        on_commit = self._config.on_commit
        chosen = offsets_to_commit(
            server,
            token,
            message,
            offsets,
            consumed,
            asynchronous=asynchronous,
            on_commit=on_commit,
        )
        if chosen is None:
            return None
        if server.subscribed:
            refuse_foreign(chosen, server.assigned())
        runtime = self._ensure_runtime()  # without a subscription: a non-member commit
        outcome: list[ReportCommitResult] = []
        reported = offsets_reported(chosen, server.assigned(), everything=everything)

        def on_result(result: ReportCommitResult) -> None:
            outcome.append(result)
            if asynchronous and on_commit is not None:
                error, partitions = commit_outcome(reported, result)
                on_commit(error, partitions)

        server.commit_waiters[token] = CommitWaiter(chosen, on_result)
        if asynchronous:
            self._to_background.put(CommitRequested(token, dict(chosen)))
            return None
        timeout_ms = sync_commit_timeout_ms(
            self._config.max_poll_interval_ms, self._last_poll_ms, self._now_ms()
        )
        self._to_background.put(CommitRequested(token, dict(chosen), timeout_ms))
        self._cluster.run_until(
            lambda: token in runtime.reported_tokens or runtime.finished,
            self._now_ms() + timeout_ms + 1,
        )
        if token not in runtime.reported_tokens or not server.take_commit_result(token, 1.0):
            server.commit_waiters.pop(token, None)
            raise kafka_exception(
                KafkaError._TIMED_OUT, f"commit timed out after {timeout_ms / 1000} s"
            )
        runtime.reported_tokens.discard(token)
        error, partitions = commit_outcome(reported, outcome[0])
        if error is not None:
            raise commit_failed(error.code())
        return partitions

    def store_offsets(
        self, message: Message | None = None, offsets: list[KafkaTopicPartition] | None = None
    ) -> None:
        """Store offsets for the next commit (needs ``enable.auto.offset.store=false``)."""
        self._check_open()
        self._offsets.store(message, offsets, self._server.assigned)

    def committed(
        self, partitions: list[KafkaTopicPartition], timeout: float | None = -1
    ) -> list[KafkaTopicPartition]:
        """The committed offsets of ``partitions`` (OffsetFetch with the member epoch)."""
        self._check_open()
        backoff_ms = (self._config.retry_backoff_ms, self._config.retry_backoff_max_ms)
        return fetch_committed(
            self._cluster, self._config.group_id, self.runtime, partitions, timeout, backoff_ms
        )

    def position(self, partitions: list[KafkaTopicPartition]) -> list[KafkaTopicPartition]:
        """The offset of the next record to return, per partition (OFFSET_INVALID if unknown)."""
        self._check_open()
        keys = [(tp.topic, tp.partition) for tp in partitions]
        known = self._server.positions(keys)
        return [KafkaTopicPartition(t, p, known.get((t, p), _OFFSET_INVALID)) for t, p in keys]
