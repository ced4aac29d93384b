"""The methods of :class:`consumer.Consumer` that are librdkafka's own, passed through.

Pausing, seeking and the metadata and offset lookups are the data plane's business (the member
has no say in them), so :class:`DataPlaneMethods` forwards them to the librdkafka consumer
unchanged, as confluent-kafka's ``Consumer`` behaves.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition as KafkaTopicPartition

from consumer._client.dataplane import DataPlane

__all__ = ["DataPlaneMethods"]


class DataPlaneMethods:
    """Base of :class:`consumer.Consumer`: the calls it passes to its data plane."""

    _dataplane: DataPlane

    def _check_open(self) -> None:
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
        """Move the fetch position of an owned partition (one of the group's new partitions
        that still waits for its start offset starts at the sought one)."""
        self._check_open()
        if not self._seek_waiting(partition):
            self._dataplane.seek(partition)

    def _seek_waiting(self, partition: KafkaTopicPartition) -> bool:
        """Start a partition that waits for its start offset at ``partition.offset`` (True),
        or leave the seek to the data plane (False)."""
        return False

    def get_watermark_offsets(
        self, partition: KafkaTopicPartition, timeout: float | None = -1, cached: bool = False
    ) -> tuple[int, int] | None:
        """Low and high watermark offsets of a partition."""
        self._check_open()
        timeout_s = None if timeout is None or timeout < 0 else timeout
        return self._dataplane.get_watermark_offsets(partition, timeout_s, cached)

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The cluster id, as ``confluent_kafka.Consumer.cluster_id``."""
        self._check_open()
        return self._dataplane.cluster_id(timeout)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Cluster metadata, as ``confluent_kafka.Consumer.list_topics``."""
        self._check_open()
        return self._dataplane.list_topics(topic, timeout)

    def offsets_for_times(
        self, partitions: list[KafkaTopicPartition], timeout: float = -1
    ) -> list[KafkaTopicPartition]:
        """Earliest offsets whose timestamps are at or after the given ones."""
        self._check_open()
        result: list[KafkaTopicPartition] = self._dataplane.offsets_for_times(partitions, timeout)
        return result
