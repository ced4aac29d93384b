"""Manual assignment for :class:`~consumer.testing.sim.FakeConsumer`: the real consumer's
:class:`~consumer._client.manual.ManualAssignment` (the same calls, errors and mixing rules with
``subscribe()``), on simulated time and the simulated cluster's committed offsets.

Two things differ from the real consumer's only in where they come from: a partition assigned
without a start offset starts at the group's committed offset in the :class:`SimCluster` (else
where ``auto.offset.reset`` says), which librdkafka looks up on the real one; and the auto-commit
interval and the final commit of ``close()`` run on the simulated clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import cast

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED

from consumer._client.app_thread import AppThreadServer
from consumer._client.dataplane import DataPlane
from consumer._client.manual import CLOSE_COMMIT_TIMEOUT_S, ManualAssignment
from consumer._client.offsets import OffsetBook
from consumer.config import ConsumerConfig
from consumer.member import TopicPartition
from consumer.testing.sim.cluster import SimCluster
from consumer.testing.sim.dataplane import SimDataPlane
from consumer.testing.sim.runtime import SimRuntime

__all__ = ["SimManualAssignment"]

_log = logging.getLogger("consumer")

Key = tuple[str, int]


class _StartAtCommitted:
    """The fake data plane as manual assignment sees it: a partition given without a start
    offset (``OFFSET_STORED``) starts at the group's committed offset, else at the reset."""

    def __init__(self, dataplane: SimDataPlane, cluster: SimCluster, config: ConsumerConfig):
        self._dataplane = dataplane
        self._cluster = cluster
        self._config = config

    def assign(self, start_offsets: Mapping[Key, int]) -> None:
        committed = self._cluster.group(self._config.group_id).committed
        starts = {}
        for key, offset in start_offsets.items():
            if offset == OFFSET_STORED:
                stored = committed.get(TopicPartition(*key))
                offset = stored if stored is not None else self._reset_start()
            starts[key] = offset
        self._dataplane.assign(starts)

    def unassign(self, partitions: Iterable[Key]) -> None:
        self._dataplane.unassign(partitions)

    def _reset_start(self) -> int:
        reset = self._config.auto_offset_reset
        if reset == "earliest":
            return OFFSET_BEGINNING
        if reset == "latest":
            return OFFSET_END
        return OFFSET_STORED  # "error": the fake data plane raises its reset error


class SimManualAssignment(ManualAssignment):
    """:class:`ManualAssignment` on the simulated cluster (see the module docstring)."""

    def __init__(
        self,
        config: ConsumerConfig,
        dataplane: SimDataPlane,
        server: AppThreadServer,
        offsets: OffsetBook,
        start_runtime: Callable[[], SimRuntime],
        cluster: SimCluster,
    ) -> None:
        view = cast(DataPlane, _StartAtCommitted(dataplane, cluster, config))
        super().__init__(config, view, server, offsets, start_runtime)
        self._cluster = cluster
        self._runtime_of = start_runtime

    def _now_s(self) -> float:
        return self._cluster.clock.now_ms / 1000

    def _wait_for(self, token: int) -> None:
        """Run the simulated cluster until the commit ``token`` is answered (bounded as the
        real consumer's wait), then take its result as the real one does."""
        runtime = self._runtime_of()
        deadline_ms = self._cluster.clock.now_ms + round(CLOSE_COMMIT_TIMEOUT_S * 1000)
        self._cluster.run_until(
            lambda: token in runtime.reported_tokens or runtime.finished, deadline_ms
        )
        if token not in runtime.reported_tokens:
            self._server.commit_waiters.pop(token, None)
            logger = self._server.callbacks.logger or _log
            logger.warning("final commit timed out after %s s", CLOSE_COMMIT_TIMEOUT_S)
            return
        runtime.reported_tokens.discard(token)
        super()._wait_for(token)
