"""The part of :class:`~consumer.testing.sim.FakeConsumer`'s API that acts on its data plane
alone: fetch control, positions, the assignment calls allowed inside rebalance callbacks, and the
methods that are not simulated (they raise ``NotImplementedError`` naming themselves)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.app_thread import AppThreadServer
from consumer._client.errors import kafka_exception
from consumer.testing.sim.cluster import SimCluster
from consumer.testing.sim.dataplane import SimDataPlane

__all__ = ["FetchControl"]


class FetchControl:
    """Mixed into :class:`~consumer.testing.sim.FakeConsumer` (same methods as the real one)."""

    _cluster: SimCluster
    _dataplane: SimDataPlane
    _server: AppThreadServer

    def _check_open(self) -> None:  # pragma: no cover - FakeConsumer defines it
        raise NotImplementedError

    def pause(self, partitions: list[KafkaTopicPartition]) -> None:
        """Stop returning records of these partitions until ``resume()``."""
        self._check_open()
        self._dataplane.pause(partitions)

    def resume(self, partitions: list[KafkaTopicPartition]) -> None:
        """Resume paused partitions."""
        self._check_open()
        self._dataplane.resume(partitions)

    def seek(self, partition: KafkaTopicPartition) -> None:
        """Move the fetch position of an owned partition."""
        self._check_open()
        self._dataplane.seek(partition)

    def get_watermark_offsets(
        self, partition: KafkaTopicPartition, timeout: float | None = -1, cached: bool = False
    ) -> tuple[int, int] | None:
        """Low and high watermark offsets of a partition."""
        self._check_open()
        return self._dataplane.watermarks(partition.topic, partition.partition)

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The simulated cluster's id."""
        self._check_open()
        return f"simulated-{self._cluster.seed}"

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Not simulated: raises ``NotImplementedError``."""
        raise NotImplementedError("FakeConsumer.list_topics() is not simulated")

    def offsets_for_times(
        self, partitions: list[KafkaTopicPartition], timeout: float = -1
    ) -> list[KafkaTopicPartition]:
        """Not simulated: raises ``NotImplementedError``."""
        raise NotImplementedError("FakeConsumer.offsets_for_times() is not simulated")

    # --- assignment calls from rebalance callbacks -------------------------------------------

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_assign``: start these partitions at the offsets given (if any)."""
        self._check_assignment_call("incremental_assign")
        overrides = self._server.assign_overrides
        if overrides is None:
            return
        for tp in partitions:
            if tp.offset >= 0 or tp.offset in (-2, -1):
                overrides[(tp.topic, tp.partition)] = tp.offset

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_assign``: as :meth:`incremental_assign`."""
        self.incremental_assign(partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_revoke`` / ``on_lost``: accepted and ignored (the member unassigns)."""
        self._check_assignment_call("incremental_unassign")

    def unassign(self) -> None:
        """Inside ``on_revoke`` / ``on_lost``: accepted and ignored (the member unassigns)."""
        self._check_assignment_call("unassign")

    def _check_assignment_call(self, method: str) -> None:
        self._check_open()
        if not self._server.in_callback:
            raise kafka_exception(
                KafkaError._STATE,
                f"{method}() outside a rebalance callback: manual assignment is not supported, "
                "partitions come from the consumer group (use subscribe())",
            )
