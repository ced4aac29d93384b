"""The part of :class:`~consumer.testing.sim.FakeConsumer`'s API that acts on its data plane
alone: fetch control, positions, the assignment calls (inside rebalance callbacks, or manual
assignment), and the methods that are not simulated (they raise ``NotImplementedError`` naming
themselves)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.app_thread import AppThreadServer
from consumer.testing.sim.cluster import SimCluster
from consumer.testing.sim.dataplane import SimDataPlane
from consumer.testing.sim.manual import SimManualAssignment

__all__ = ["FetchControl"]


class FetchControl:
    """Mixed into :class:`~consumer.testing.sim.FakeConsumer` (same methods as the real one)."""

    _cluster: SimCluster
    _dataplane: SimDataPlane
    _server: AppThreadServer
    _manual: SimManualAssignment

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

    # --- assignment: inside rebalance callbacks, or manual ------------------------------------

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_assign``: start these partitions at the offsets given (if any); outside
        callbacks: add them to the manual assignment (no group member is created)."""
        if not self._in_callback():
            self._manual.incremental_assign(partitions)
            return
        overrides = self._server.assign_overrides
        if overrides is None:
            return
        for tp in partitions:
            if tp.offset >= 0 or tp.offset in (-2, -1):
                overrides[(tp.topic, tp.partition)] = tp.offset

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_assign``: as :meth:`incremental_assign`; outside callbacks: replace the
        manual assignment."""
        if self._in_callback():
            self.incremental_assign(partitions)
            return
        self._manual.assign(partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        """Inside ``on_revoke`` / ``on_lost``: accepted and ignored (the member unassigns);
        outside callbacks: remove manually assigned partitions."""
        if not self._in_callback():
            self._manual.incremental_unassign(partitions)

    def unassign(self) -> None:
        """Inside ``on_revoke`` / ``on_lost``: accepted and ignored (the member unassigns);
        outside callbacks: remove every manually assigned partition."""
        if not self._in_callback():
            self._manual.unassign()

    def _in_callback(self) -> bool:
        self._check_open()
        return self._server.in_callback
