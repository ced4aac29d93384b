"""A work queue on Spark executors with share groups (KIP-932): :func:`share_work_queue`.

Each of N Spark tasks runs one :class:`consumer.ShareConsumer` member of a share group in explicit
acknowledgement mode. Share groups hand the records of one partition to many members, so more
tasks than partitions cooperate on a topic. For every record the task calls the user's
``process(record)``:

* it returned: the record is ACCEPTed (done for the whole group);
* it raised: the record is RELEASEd, so any member (often another task) gets it again with
  ``delivery_count`` one higher; once ``delivery_count`` has reached ``max_attempts`` a failure
  REJECTs it instead (a poison record) and the task reports it;
* it raised one of ``stop_task_on``: the record and everything else the task holds are released
  and the task ends (an executor that cannot work leaves the records to the others).

Acknowledgements are sent (``commit_sync``) after each polled batch, before the next poll. The
member is closed in ``finally`` whatever happens, which releases what it still holds at once; a
task that dies without that (executor lost) gives its records back when their locks expire.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import AcknowledgeType, Message

from consumer.config import ConfigError
from consumer.share_consumer import ShareConsumer, parse_share_config
from consumer.spark.executor import Record, _record, _task_attempt
from consumer.spark.share_groups import (
    OffsetReset,
    configure_share_group,
    positive_int,
    share_group_configs,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "PoisonRecord",
    "ShareTaskReport",
    "ShareTaskSpec",
    "WorkQueueReport",
    "run_share_task",
    "share_work_queue",
]

_log = logging.getLogger("consumer.spark")

#: What ``process`` may raise to end its task (the record goes back to the group).
StopTaskOn = tuple[type[Exception], ...]
_COMMIT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PoisonRecord:
    """A record REJECTed because ``process`` failed on its ``max_attempts``-th delivery."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    delivery_count: int
    #: ``repr`` of the last exception ``process`` raised for it.
    error: str


@dataclass(frozen=True)
class ShareTaskReport:
    """What one task (one share member) did; returned by the task to the driver."""

    task: int
    attempt: int
    member_id: str
    #: Records whose ``process`` returned and whose ACCEPT the broker did not refuse.
    accepted: int
    #: Failed deliveries given back for a retry (RELEASE), including the ones released when
    #: the task stopped on a ``stop_task_on`` error.
    released: int
    #: Poison records (REJECTed).
    rejected: tuple[PoisonRecord, ...]
    #: Acknowledgements the broker refused (``commit_sync``): e.g. the record lock had expired,
    #: so the record may be delivered again.
    ack_failures: int
    #: The partitions this task received records from, sorted.
    partitions: tuple[tuple[str, int], ...]
    #: ``repr`` of the ``stop_task_on`` exception that ended the task, else None.
    stopped_by: str | None
    runtime_s: float


@dataclass(frozen=True)
class WorkQueueReport:
    """The reports of every task of one :func:`share_work_queue` run."""

    tasks: tuple[ShareTaskReport, ...]

    @property
    def accepted(self) -> int:
        """Records processed and ACCEPTed, all tasks together."""
        return sum(task.accepted for task in self.tasks)

    @property
    def released(self) -> int:
        """Deliveries RELEASEd for a retry, all tasks together."""
        return sum(task.released for task in self.tasks)

    @property
    def poison(self) -> tuple[PoisonRecord, ...]:
        """Every REJECTed record, in task order."""
        return tuple(record for task in self.tasks for record in task.rejected)

    @property
    def ack_failures(self) -> int:
        """Acknowledgements the broker refused, all tasks together."""
        return sum(task.ack_failures for task in self.tasks)

    @property
    def stopped(self) -> tuple[ShareTaskReport, ...]:
        """The tasks that ended on a ``stop_task_on`` error."""
        return tuple(task for task in self.tasks if task.stopped_by is not None)


@dataclass(frozen=True)
class ShareTaskSpec:
    """Everything a share task needs; plain values only (it is pickled to executors).

    ``config`` is left out of the repr: it may hold passwords.
    """

    config: tuple[tuple[str, Any], ...] = field(repr=False)
    topics: tuple[str, ...]
    max_attempts: int
    idle_timeout_s: float
    max_runtime_s: float | None = None
    poll_timeout_s: float = 0.5
    stop_task_on: StopTaskOn = field(default_factory=tuple)

    def __post_init__(self) -> None:
        conf = dict(self.config)
        mode = str(conf.get("share.acknowledgement.mode", "explicit")).strip().lower()
        if mode != "explicit":
            raise ConfigError(
                f"Invalid value {conf['share.acknowledgement.mode']!r} for "
                "'share.acknowledgement.mode': the work queue acknowledges each record itself, "
                "so only 'explicit' is allowed (or leave the key out)."
            )
        parse_share_config(self.consumer_config())  # names the key of any bad value
        if not self.topics or any(not isinstance(t, str) or not t for t in self.topics):
            raise ValueError(f"topics must be a non-empty list of topic names, got {self.topics}")
        positive_int("max_attempts", self.max_attempts)
        _positive_seconds("idle_timeout_s", self.idle_timeout_s)
        _positive_seconds("poll_timeout_s", self.poll_timeout_s)
        if self.max_runtime_s is not None:
            _positive_seconds("max_runtime_s", self.max_runtime_s)
        for kind in self.stop_task_on:
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                raise TypeError(f"stop_task_on must hold Exception subclasses, got {kind!r}")

    @classmethod
    def create(
        cls,
        conf: Mapping[str, Any],
        topics: Sequence[str],
        *,
        max_attempts: int,
        idle_timeout_s: float,
        max_runtime_s: float | None = None,
        poll_timeout_s: float = 0.5,
        stop_task_on: Iterable[type[Exception]] = (),
    ) -> ShareTaskSpec:
        """Build and check a spec (raises ``ConfigError``/``ValueError`` naming the key)."""
        if isinstance(topics, str):
            raise TypeError("topics must be a list of topic names, not a string")
        return cls(
            config=tuple(sorted(conf.items())),
            topics=tuple(topics),
            max_attempts=max_attempts,
            idle_timeout_s=idle_timeout_s,
            max_runtime_s=max_runtime_s,
            poll_timeout_s=poll_timeout_s,
            stop_task_on=tuple(stop_task_on),
        )

    @property
    def group_id(self) -> str:
        """The share group's id (``group.id``)."""
        return str(dict(self.config)["group.id"])

    def consumer_config(self) -> dict[str, Any]:
        """The member's configuration: the user's, in explicit acknowledgement mode, and with
        ``share.acquire.mode=record_limit`` unless the user chose: the broker then locks at most
        ``max.poll.records`` records per fetch for a member, instead of whole producer batches
        (which could give one task everything while the others wait)."""
        config = dict(self.config)
        config["share.acknowledgement.mode"] = "explicit"
        config.setdefault("share.acquire.mode", "record_limit")
        return config


def _positive_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")


def share_record(message: Message) -> Record:
    """The dict handed to ``process``: the executor members' record plus ``delivery_count``."""
    record = _record(message)
    record["delivery_count"] = message.delivery_count() or 1
    return record


def run_share_task(
    spec: ShareTaskSpec, process: Callable[[Record], object], index: int = 0
) -> ShareTaskReport:
    """One share member's whole life (runs inside a Spark task; usable without Spark too).

    Returns when no record came for ``idle_timeout_s``, after ``max_runtime_s``, or when
    ``process`` raised one of ``stop_task_on``. Any other exception escaping (from the consumer,
    or a ``BaseException`` from ``process``) propagates after the member is closed.
    """
    started = time.monotonic()
    consumer = ShareConsumer(spec.consumer_config())
    accepted = released = ack_failures = 0
    rejected: list[PoisonRecord] = []
    partitions: set[tuple[str, int]] = set()
    stopped_by: Exception | None = None
    try:
        consumer.subscribe(list(spec.topics))
        last_record = time.monotonic()
        while stopped_by is None:
            now = time.monotonic()
            if now - last_record >= spec.idle_timeout_s:
                break
            if spec.max_runtime_s is not None and now - started >= spec.max_runtime_s:
                break
            messages = consumer.poll(spec.poll_timeout_s)
            if not messages:
                continue
            last_record = time.monotonic()
            accepted_now: dict[tuple[str, int], int] = {}
            for position, message in enumerate(messages):
                record = share_record(message)
                key = (record["topic"], record["partition"])
                partitions.add(key)
                outcome = _process_one(spec, process, message, record)
                if isinstance(outcome, PoisonRecord):
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
                    rejected.append(outcome)
                elif isinstance(outcome, spec.stop_task_on):
                    # Not acknowledged: closing the member releases this record and the rest
                    # of the batch. A RELEASE now would ride on a fetch that may acquire the
                    # record again for this very member.
                    stopped_by = outcome
                    released += len(messages) - position
                    break
                elif outcome is not None:
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    released += 1
                else:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    accepted_now[key] = accepted_now.get(key, 0) + 1
            refused = _refused(consumer.commit_sync(_COMMIT_TIMEOUT_S))
            for key, count in accepted_now.items():
                if key in refused:
                    ack_failures += count
                else:
                    accepted += count
    finally:
        member_id = consumer.memberid()
        consumer.close()  # releases whatever is still held (prefetched, or on an error)
    if stopped_by is not None:
        _log.warning(
            "share task %d stopped on %r; its records went back to the group", index, stopped_by
        )
    return ShareTaskReport(
        task=index,
        attempt=_task_attempt(),
        member_id=member_id,
        accepted=accepted,
        released=released,
        rejected=tuple(rejected),
        ack_failures=ack_failures,
        partitions=tuple(sorted(partitions)),
        stopped_by=None if stopped_by is None else repr(stopped_by),
        runtime_s=round(time.monotonic() - started, 3),
    )


def _process_one(
    spec: ShareTaskSpec, process: Callable[[Record], object], message: Message, record: Record
) -> PoisonRecord | Exception | None:
    """None on success; the exception to RELEASE on; a PoisonRecord to REJECT."""
    try:
        error = message.error()
        if error is not None:
            raise RuntimeError(f"record error: {error}")
        process(record)
    except spec.stop_task_on as exc:
        return exc  # the executor's fault, not the record's: released, never rejected
    except Exception as exc:  # noqa: BLE001 - the record's failure, acknowledged by the caller
        count = int(record["delivery_count"])
        if count >= spec.max_attempts:
            _log.warning(
                "rejecting %s[%d]@%d after %d deliveries: %r",
                record["topic"],
                record["partition"],
                record["offset"],
                count,
                exc,
            )
            return PoisonRecord(
                topic=record["topic"],
                partition=record["partition"],
                offset=record["offset"],
                key=record["key"],
                delivery_count=count,
                error=repr(exc),
            )
        return exc
    return None


def _refused(outcome: Mapping[Any, Exception | None]) -> set[tuple[str, int]]:
    refused: set[tuple[str, int]] = set()
    for partition, error in outcome.items():
        if error is not None:
            _log.warning(
                "acknowledgements of %s[%d] refused: %s",
                partition.topic,
                partition.partition,
                error,
            )
            refused.add((partition.topic, partition.partition))
    return refused


def share_work_queue(
    spark: SparkSession,
    conf: Mapping[str, Any],
    topics: Sequence[str],
    process: Callable[[Record], object],
    *,
    tasks: int,
    max_attempts: int,
    idle_timeout_s: float,
    auto_offset_reset: OffsetReset | None,
    max_runtime_s: float | None = None,
    stop_task_on: Iterable[type[Exception]] = (),
    poll_timeout_s: float = 0.5,
) -> WorkQueueReport:
    """Process ``topics`` with ``tasks`` Spark tasks, each a member of the share group
    ``conf["group.id"]``; return what every task did.

    ``conf`` is a :class:`consumer.ShareConsumer` configuration (``bootstrap.servers``,
    ``group.id``, security, ``max.poll.records``, ...); the members acknowledge explicitly
    (``share.acknowledgement.mode`` may only be ``explicit``). ``process(record)`` runs inside
    the task once per delivered record (a dict: topic, partition, offset, key, value, timestamp,
    headers, delivery_count). A record is ACCEPTed after ``process`` returned; if it raised, the
    record is RELEASEd for another delivery, or REJECTed (and reported in
    :attr:`WorkQueueReport.poison`) when its ``delivery_count`` has reached ``max_attempts``.
    An exception of a type in ``stop_task_on`` releases the record and ends the task (see
    the module docstring). A task stops after ``idle_timeout_s`` without records or after
    ``max_runtime_s``.

    ``auto_offset_reset`` (required: ``"earliest"``, ``"latest"`` or None) sets the group's
    ``share.auto.offset.reset`` before the job (None leaves the group's config alone; Kafka's
    default is ``latest``). ``max_attempts`` must not exceed the group's
    ``share.delivery.count.limit`` (checked here when the broker lets us describe the group):
    beyond it the broker archives a failing record itself, unreported.

    Delivery is at-least-once: a record whose lock expired during ``process`` (see
    ``share.record.lock.duration.ms``), or whose task died before acknowledging it, is
    delivered again; make ``process`` idempotent.

    Raises:
        ConfigError / ValueError / TypeError: a bad configuration key or argument (named).
    """
    spec = ShareTaskSpec.create(
        conf,
        topics,
        max_attempts=max_attempts,
        idle_timeout_s=idle_timeout_s,
        max_runtime_s=max_runtime_s,
        poll_timeout_s=poll_timeout_s,
        stop_task_on=stop_task_on,
    )
    positive_int("tasks", tasks)
    if auto_offset_reset is not None:
        configure_share_group(conf, auto_offset_reset=auto_offset_reset)
    _check_delivery_limit(conf, max_attempts)
    slots = spark.sparkContext.defaultParallelism
    if tasks > slots:
        warnings.warn(
            f"{tasks} share tasks but only {slots} task slots (defaultParallelism): tasks "
            "beyond the slots start only when others finish",
            RuntimeWarning,
            stacklevel=2,
        )

    def task(index: int, _: Iterable[int]) -> Iterable[ShareTaskReport]:
        return iter([run_share_task(spec, process, index)])

    reports = spark.sparkContext.parallelize(range(tasks), tasks).mapPartitionsWithIndex(task)
    return WorkQueueReport(tuple(sorted(reports.collect(), key=lambda r: r.task)))


def _check_delivery_limit(conf: Mapping[str, Any], max_attempts: int) -> None:
    try:
        limit = share_group_configs(conf).get("share.delivery.count.limit")
    except Exception as exc:  # noqa: BLE001 - e.g. no DESCRIBE_CONFIGS permission: not checked
        _log.warning("could not describe share group %r: %s", conf.get("group.id"), exc)
        return
    if limit is not None and max_attempts > int(limit):
        raise ValueError(
            f"max_attempts={max_attempts} exceeds the group's share.delivery.count.limit="
            f"{limit}: the broker would archive a failing record after {limit} deliveries "
            "without reporting it; lower max_attempts or raise the limit "
            "(configure_share_group(conf, delivery_count_limit=...))"
        )
