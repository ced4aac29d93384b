"""CommitRequestManager: auto-commit, commit before revocation and on close, user commits, and
committed-offset fetches, all carrying the member id and epoch.

The offsets committed are never invented: they are the ones the application reported as consumed
(:class:`~consumer.member.inputs.ConsumedOffsetsReported` or ``AppPolled.consumed_offsets``), or the
ones a user commit names.

Error policy (reference section E):

* retriable errors (7, 13, 14, 15, 16, 88) are retried with backoff until the job's deadline;
* STALE_MEMBER_EPOCH (113) on an auto / pre-revoke / close commit expedites a heartbeat and retries
  once the epoch changed, until the rebalance deadline; on a user commit it is surfaced;
* STALE_MEMBER_EPOCH on an offset fetch is retried the same way, with no deadline (it is never read
  as "no committed offset");
* anything else ends the job: surfaced as ReportError (non-fatal) or, for user commits, in
  ReportCommitResult.

A commit is never re-sent for a partition the member no longer owns: offsets consumed under one
ownership must not overwrite what a later owner (or this member, after rejoining) committed. When
a round revokes partitions, their part of a waiting job fails with REBALANCE_IN_PROGRESS; when the
membership ends (fenced, poll timeout, left, failed), auto / pre-revoke / close commits are dropped
and user commits fail with UNKNOWN_MEMBER_ID. A request already in flight still counts when its
answer comes, but is not retried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from consumer.member.commands import (
    Command,
    CommitOffsets,
    CommitReason,
    FetchCommittedOffsets,
    ReportCommitResult,
    ReportError,
)
from consumer.member.config import MemberConfig
from consumer.member.errors_table import RETRIABLE_OFFSET_ERRORS, ErrorCode, error_name
from consumer.member.heartbeat import ExponentialBackoff
from consumer.member.inputs import CommitCompleted, CommittedOffsetsFetched
from consumer.member.partitions import TopicPartition

#: ``(member_id, member_epoch)`` to put on offset requests; ``(None, -1)`` outside the group.
Identity = Callable[[], tuple[str | None, int]]


@dataclass(slots=True)
class _CommitJob:
    job_id: int
    reason: CommitReason
    offsets: dict[TopicPartition, int]
    deadline_ms: int | None
    token: int | None = None
    request_id: int | None = None
    sent_epoch: int = -1
    retry_at_ms: int | None = None
    waiting_for_epoch: bool = False
    attempts: int = 0
    errors: dict[TopicPartition, int] = field(default_factory=dict)
    #: Set when the ownership the offsets belong to ended while a request was in flight.
    no_retry: bool = False


@dataclass(slots=True)
class _FetchJob:
    job_id: int
    partitions: tuple[TopicPartition, ...]
    request_id: int | None = None
    sent_epoch: int = -1
    retry_at_ms: int | None = None
    waiting_for_epoch: bool = False
    attempts: int = 0


class CommitRequestManager:
    """Builds OffsetCommit / OffsetFetch commands and decides retries."""

    def __init__(
        self,
        config: MemberConfig,
        backoff: ExponentialBackoff,
        next_id: Callable[[], int],
        identity: Identity,
    ) -> None:
        self._config = config
        self._backoff = backoff
        self._next_id = next_id
        self._identity = identity
        self.consumed: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self._next_auto_commit_ms: int | None = None
        self._commits: dict[int, _CommitJob] = {}
        self._fetches: dict[int, _FetchJob] = {}

    # --- consumed offsets and the auto-commit timer -----------------------------------------

    def record_consumed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Remember the next offsets to consume, as reported by the application."""
        self.consumed.update(offsets)

    def forget(self, keep: Iterable[TopicPartition]) -> list[Command]:
        """Drop consumed/committed offsets of partitions no longer owned, and stop retrying
        commits of those partitions (their user commits fail with REBALANCE_IN_PROGRESS)."""
        kept = set(keep)
        self.consumed = {tp: off for tp, off in self.consumed.items() if tp in kept}
        self.committed = {tp: off for tp, off in self.committed.items() if tp in kept}
        commands: list[Command] = []
        for job in list(self._commits.values()):
            gone = {tp for tp in job.offsets if tp not in kept}
            commands += self._cut(job, gone, ErrorCode.REBALANCE_IN_PROGRESS)
        return commands

    def _cut(self, job: _CommitJob, gone: set[TopicPartition], code: int) -> list[Command]:
        """``gone`` partitions of ``job`` are no longer owned: never send them again; if the job
        is waiting to be (re)sent, they fail with ``code``."""
        if not gone:
            return []
        if job.request_id is not None:
            job.no_retry = True  # its answer still counts
            return []
        job.errors.update(dict.fromkeys(gone, code))
        job.offsets = {tp: off for tp, off in job.offsets.items() if tp not in gone}
        if not job.offsets:
            return self._finish_commit(job, quiet=job.reason is not CommitReason.USER)
        return []

    def reset_auto_commit_timer(self, now_ms: int) -> None:
        """Start a new auto-commit interval (after a reconciliation completes)."""
        if self._config.auto_commit:
            self._next_auto_commit_ms = now_ms + self._config.auto_commit_interval_ms

    def stop_auto_commit_timer(self) -> None:
        """No auto-commit while out of the group."""
        self._next_auto_commit_ms = None

    def uncommitted(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Consumed offsets of ``partitions`` that differ from what was last committed."""
        return {
            tp: self.consumed[tp]
            for tp in partitions
            if tp in self.consumed and self.committed.get(tp) != self.consumed[tp]
        }

    def auto_commit(
        self, now_ms: int, owned: Callable[[], Iterable[TopicPartition]]
    ) -> list[Command]:
        """Commit consumed offsets of ``owned()`` when the auto-commit interval elapsed
        (``owned`` is only called then)."""
        due = self._next_auto_commit_ms
        if due is None or now_ms < due:
            return []
        if any(job.reason is CommitReason.AUTO for job in self._commits.values()):
            return []
        self._next_auto_commit_ms = now_ms + self._config.auto_commit_interval_ms
        return self.start_commit(CommitReason.AUTO, self.uncommitted(owned()), now_ms)[1]

    # --- commits ----------------------------------------------------------------------------

    def start_commit(
        self,
        reason: CommitReason,
        offsets: Mapping[TopicPartition, int],
        now_ms: int,
        *,
        deadline_ms: int | None = None,
        token: int | None = None,
    ) -> tuple[int | None, list[Command]]:
        """Start a commit job: its id (None when there is nothing to do) and its first command."""
        if not offsets:
            return None, [] if token is None else [ReportCommitResult(token, {})]
        if deadline_ms is None:
            timeout_ms = (
                self._config.user_commit_timeout_ms
                if reason is CommitReason.USER
                else self._config.rebalance_timeout_ms
            )
            deadline_ms = now_ms + timeout_ms
        job = _CommitJob(self._next_id(), reason, dict(offsets), deadline_ms, token)
        self._commits[job.job_id] = job
        return job.job_id, [self._send_commit(job)]

    def _send(self, job: _CommitJob | _FetchJob) -> tuple[str | None, int]:
        """Mark ``job`` as sent now; the identity its request carries."""
        member_id, epoch = self._identity()
        job.request_id = self._next_id()
        job.sent_epoch = epoch
        job.retry_at_ms = None
        job.waiting_for_epoch = False
        return member_id, epoch

    def _send_commit(self, job: _CommitJob) -> CommitOffsets:
        member_id, epoch = self._send(job)
        assert job.request_id is not None
        return CommitOffsets(
            request_id=job.request_id,
            reason=job.reason,
            group_id=self._config.group_id,
            member_id=member_id,
            member_epoch=epoch,
            offsets=dict(job.offsets),
        )

    def on_commit_completed(
        self, completed: CommitCompleted, now_ms: int
    ) -> tuple[int | None, bool, list[Command]]:
        """Process an OffsetCommit answer.

        Returns ``(finished job id or None, wants_heartbeat, commands)``; ``wants_heartbeat``
        asks the caller to expedite a heartbeat because the epoch was stale.
        """
        job = next(
            (j for j in self._commits.values() if j.request_id == completed.request_id), None
        )
        if job is None:
            return None, False, []
        job.request_id = None
        errors = {
            tp: completed.error_code or completed.partition_errors.get(tp, 0) for tp in job.offsets
        }
        for tp, code in errors.items():
            if code == ErrorCode.NONE:
                self.committed[tp] = job.offsets[tp]
        failed = {tp: code for tp, code in errors.items() if code != ErrorCode.NONE}
        job.errors.update(failed)
        for tp in errors:
            if tp not in failed:
                job.errors.pop(tp, None)
        job.offsets = {tp: job.offsets[tp] for tp in failed}
        codes = set(failed.values())
        stale = ErrorCode.STALE_MEMBER_EPOCH in codes
        retriable_only = bool(codes) and codes <= RETRIABLE_OFFSET_ERRORS | (
            set() if job.reason is CommitReason.USER else {ErrorCode.STALE_MEMBER_EPOCH}
        )
        expired = job.deadline_ms is not None and now_ms >= job.deadline_ms
        if not codes or not retriable_only or expired or job.no_retry:
            return job.job_id, False, self._finish_commit(job)
        job.attempts += 1
        if stale:
            if self._epoch_moved_since_sent(job):
                return None, False, [self._send_commit(job)]
            job.waiting_for_epoch = True
        else:
            job.retry_at_ms = now_ms + self._backoff.delay_ms(job.attempts)
        return None, stale, []

    def _epoch_moved_since_sent(self, job: _CommitJob | _FetchJob) -> bool:
        """True when the member epoch changed while ``job``'s request was in flight: its
        STALE_MEMBER_EPOCH answer needs no fresh epoch, it already has one (waiting for the
        next change would wait for a rebalance that may never come)."""
        return job.sent_epoch != self._identity()[1]

    def _finish_commit(self, job: _CommitJob, *, quiet: bool = False) -> list[Command]:
        del self._commits[job.job_id]
        if job.token is not None:
            return [ReportCommitResult(job.token, dict(job.errors))]
        if not job.errors or quiet:
            return []
        code = next(iter(sorted(job.errors.values())))
        parts = ", ".join(str(tp) for tp in sorted(job.errors))
        return [
            ReportError(
                error_code=code,
                error_name=error_name(code),
                message=f"{job.reason.value} commit failed for {parts}",
                fatal=False,
            )
        ]

    # --- committed offset fetches -----------------------------------------------------------

    def start_fetch(self, partitions: tuple[TopicPartition, ...]) -> tuple[int, list[Command]]:
        """Start fetching committed offsets of ``partitions``: the job id and its request."""
        job = _FetchJob(self._next_id(), partitions)
        self._fetches[job.job_id] = job
        return job.job_id, [self._send_fetch(job)]

    def _send_fetch(self, job: _FetchJob) -> FetchCommittedOffsets:
        member_id, epoch = self._send(job)
        assert job.request_id is not None
        return FetchCommittedOffsets(
            request_id=job.request_id,
            group_id=self._config.group_id,
            member_id=member_id,
            member_epoch=epoch,
            partitions=job.partitions,
        )

    def on_fetch_completed(
        self, fetched: CommittedOffsetsFetched, now_ms: int
    ) -> tuple[tuple[int, dict[TopicPartition, int | None]] | bool, list[Command]]:
        """Process an OffsetFetch answer.

        Returns ``(job id, offsets)`` when the job is done, or a bool ``wants_heartbeat`` when it is
        retried (True for a stale epoch) or the answer was unknown (False); and the commands.
        """
        job = next((j for j in self._fetches.values() if j.request_id == fetched.request_id), None)
        if job is None:
            return False, []
        job.request_id = None
        codes = {fetched.error_code} if fetched.error_code else set()
        codes |= {fetched.partition_errors.get(tp, 0) for tp in job.partitions} - {0}
        if codes and codes <= RETRIABLE_OFFSET_ERRORS | {ErrorCode.STALE_MEMBER_EPOCH}:
            job.attempts += 1
            if ErrorCode.STALE_MEMBER_EPOCH in codes:
                if self._epoch_moved_since_sent(job):
                    return False, [self._send_fetch(job)]
                job.waiting_for_epoch = True
                return True, []
            job.retry_at_ms = now_ms + self._backoff.delay_ms(job.attempts)
            return False, []
        del self._fetches[job.job_id]
        commands: list[Command] = []
        if codes:
            code = min(codes)
            commands.append(
                ReportError(
                    error_code=code,
                    error_name=error_name(code),
                    message="committed offsets could not be fetched; the reset policy applies",
                    fatal=False,
                )
            )
        return (job.job_id, {tp: fetched.offsets.get(tp) for tp in job.partitions}), commands

    # --- time and epochs --------------------------------------------------------------------

    def on_epoch_changed(self) -> list[Command]:
        """Re-send jobs that were waiting for a fresh member epoch."""
        _, epoch = self._identity()
        commands: list[Command] = [
            self._send_commit(job)
            for job in list(self._commits.values())
            if job.waiting_for_epoch and job.sent_epoch != epoch
        ]
        commands += [
            self._send_fetch(fetch)
            for fetch in self._fetches.values()
            if fetch.waiting_for_epoch and fetch.sent_epoch != epoch
        ]
        return commands

    def poll(self, now_ms: int) -> tuple[list[int], list[Command]]:
        """Retry jobs whose backoff elapsed; finish jobs past their deadline.

        Returns the ids of the jobs that finished, and the commands.
        """
        finished: list[int] = []
        commands: list[Command] = []
        for job in list(self._commits.values()):
            if job.request_id is not None:
                continue
            if job.deadline_ms is not None and now_ms >= job.deadline_ms:
                commands += self._finish_commit(job)
                finished.append(job.job_id)
            elif job.retry_at_ms is not None and now_ms >= job.retry_at_ms:
                commands.append(self._send_commit(job))
        for fetch in self._fetches.values():
            if fetch.retry_at_ms is not None and now_ms >= fetch.retry_at_ms:
                commands.append(self._send_fetch(fetch))
        return finished, commands

    def next_deadline_ms(self) -> int | None:
        """Earliest time :meth:`poll` or :meth:`maybe_auto_commit` has something to do."""
        times = [self._next_auto_commit_ms] if self._next_auto_commit_ms is not None else []
        for job in self._commits.values():
            if job.request_id is None:
                times += [t for t in (job.retry_at_ms, job.deadline_ms) if t is not None]
        times += [f.retry_at_ms for f in self._fetches.values() if f.retry_at_ms is not None]
        return min(times) if times else None

    def abort_group_work(self) -> list[Command]:
        """The membership ended (fenced, poll timeout, left, failed): drop auto / pre-revoke /
        close commits and every fetch; user commits waiting to be (re)sent fail with
        UNKNOWN_MEMBER_ID, those in flight are not retried. Also stops the auto-commit timer."""
        self._next_auto_commit_ms = None
        commands: list[Command] = []
        for job in list(self._commits.values()):
            if job.reason is CommitReason.USER:
                commands += self._cut(job, set(job.offsets), ErrorCode.UNKNOWN_MEMBER_ID)
            else:
                del self._commits[job.job_id]
        self._fetches.clear()
        return commands
