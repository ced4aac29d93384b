"""Spark integration (``pip install kafka-group-member[spark]``); pyspark is imported lazily.

* :func:`register` - ``spark.readStream.format("kafka-group")``: a streaming source that is a
  KIP-848 group member in the driver; executors read its ranges; offsets are committed to Kafka
  after Spark has recorded each batch.
* :func:`group_snapshot` - a batch snapshot of the member's ranges, committed by the caller after
  a successful write.
* :func:`run_group_members` - N executor tasks, each a group member that processes its records
  inside the task and commits after processing.
* :func:`share_work_queue` - N executor tasks, each a share-group (KIP-932) member: more tasks
  than partitions work through a topic; each record is ACCEPTed after ``process`` succeeded,
  RELEASEd for a retry when it failed, REJECTed (reported as poison) after ``max_attempts``.
  :func:`configure_share_group` sets the group's ``share.auto.offset.reset`` and limits.
* :func:`local_session` / :func:`configure_environment` - what Spark needs to run our Python
  code (``PYSPARK_PYTHON``, pyarrow).

Guarantees per API: ``docs/howto/spark.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumer.spark._spec import GroupSpec, OffsetRange
    from consumer.spark.executor import LEDGER_SCHEMA_DDL, check_cluster, run_group_members
    from consumer.spark.session import configure_environment, local_session
    from consumer.spark.share_groups import configure_share_group, share_group_configs
    from consumer.spark.snapshot import CommitResult, GroupSnapshot, group_snapshot
    from consumer.spark.source import SOURCE_NAME, KafkaGroupDataSource, register
    from consumer.spark.work_queue import (
        PoisonRecord,
        ShareTaskReport,
        WorkQueueReport,
        share_work_queue,
    )

_EXPORTS = {
    "GroupSpec": "consumer.spark._spec",
    "OffsetRange": "consumer.spark._spec",
    "LEDGER_SCHEMA_DDL": "consumer.spark.executor",
    "check_cluster": "consumer.spark.executor",
    "run_group_members": "consumer.spark.executor",
    "configure_environment": "consumer.spark.session",
    "local_session": "consumer.spark.session",
    "CommitResult": "consumer.spark.snapshot",
    "GroupSnapshot": "consumer.spark.snapshot",
    "group_snapshot": "consumer.spark.snapshot",
    "SOURCE_NAME": "consumer.spark.source",
    "KafkaGroupDataSource": "consumer.spark.source",
    "register": "consumer.spark.source",
    "configure_share_group": "consumer.spark.share_groups",
    "share_group_configs": "consumer.spark.share_groups",
    "PoisonRecord": "consumer.spark.work_queue",
    "ShareTaskReport": "consumer.spark.work_queue",
    "WorkQueueReport": "consumer.spark.work_queue",
    "share_work_queue": "consumer.spark.work_queue",
}

__all__ = [
    "LEDGER_SCHEMA_DDL",
    "SOURCE_NAME",
    "CommitResult",
    "GroupSnapshot",
    "GroupSpec",
    "KafkaGroupDataSource",
    "OffsetRange",
    "PoisonRecord",
    "ShareTaskReport",
    "WorkQueueReport",
    "check_cluster",
    "configure_environment",
    "configure_share_group",
    "group_snapshot",
    "local_session",
    "register",
    "run_group_members",
    "share_group_configs",
    "share_work_queue",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'consumer.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
