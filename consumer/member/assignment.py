"""AssignmentManager: the target, the owned assignment, and the revoke-then-assign rounds.

A *round* moves the owned assignment towards a target. Its steps, each waiting for an input:

1. ``StopFetching(revoked)``, wait for ``FetchingStopped`` (it carries the offsets consumed up to
   that moment);
2. ``CommitOffsets(reason=pre-revoke)`` of the revoked partitions' consumed offsets (auto-commit
   only; wait for the commit, bounded by the rebalance timeout);
3. ``InvokeOnRevoke(revoked)``, wait for ``RevocationCompleted`` (bounded by the rebalance timeout:
   past it the partitions are treated as lost and the member fences itself);
4. ``FetchCommittedOffsets(added)``, wait for ``CommittedOffsetsFetched``;
5. ``ApplyAssignment`` + ``InvokeOnAssign(added)`` (always, even when nothing is new), wait for both
   ``AssignmentApplied`` and ``CallbackCompleted``;
6. the owned assignment becomes the round's target: the member acknowledges.

Releasing everything (leaving, fencing, staleness, fatal errors) is a round of the same shape
without steps 4-5: leaving commits and revokes; the others skip the commit and call
``InvokeOnLost``.

A new target arriving mid-round replaces the target and bumps the local epoch; the running round
still finishes on its own plan (so its ack names exactly what is owned), and the next round starts
from there. Fencing aborts a round: late answers to it are ignored.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from consumer.member.commands import (
    ApplyAssignment,
    Command,
    CommitReason,
    FetchMetadata,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ReportError,
    StopFetching,
)
from consumer.member.commit import CommitRequestManager
from consumer.member.config import MemberConfig
from consumer.member.inputs import (
    AssignmentApplied,
    CallbackCompleted,
    FetchingStopped,
    RevocationCompleted,
)
from consumer.member.partitions import (
    AssignmentMap,
    TopicIdPartition,
    TopicPartition,
    flatten_assignment,
)
from consumer.member.reconcile import name_partitions, plan_round, resolve_target, topic_ids_of


class RoundKind(enum.Enum):
    """What a round does."""

    RECONCILE = "reconcile"
    REVOKE_ALL = "revoke-all"
    LOSE_ALL = "lose-all"


class RoundPhase(enum.Enum):
    """The input a running round waits for."""

    STOPPING = "stopping"
    COMMITTING = "committing"
    REVOKING = "revoking"
    LOSING = "losing"
    FETCHING_OFFSETS = "fetching-offsets"
    ASSIGNING = "assigning"


#: Phases that wait on the application and are bounded by the rebalance timeout.
_BOUNDED_PHASES = frozenset({RoundPhase.STOPPING, RoundPhase.REVOKING})


class ReconcileStart(enum.Enum):
    """Outcome of :meth:`AssignmentManager.start_reconcile`."""

    IDLE = "nothing to do yet (a round runs, or names are missing)"
    SETTLED = "target equals the owned assignment"
    ACKNOWLEDGE = "owned partitions unchanged but the target is newer: acknowledge"
    STARTED = "a round started"


@dataclass(frozen=True, slots=True)
class RoundResult:
    """A finished round. ``timed_out`` means the revocation was not completed in time."""

    kind: RoundKind
    timed_out: bool = False


@dataclass(slots=True)
class _Round:
    kind: RoundKind
    local_epoch: int
    resolved: frozenset[TopicIdPartition]
    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    assigned: tuple[TopicPartition, ...]
    deadline_ms: int
    phase: RoundPhase = RoundPhase.COMMITTING
    commit_reason: CommitReason = CommitReason.PRE_REVOKE
    waiting_id: int | None = None
    callback_id: int | None = None
    committed_offsets: dict[TopicPartition, int | None] = field(default_factory=dict)
    applied: bool = False
    callback_done: bool = False


class AssignmentManager:
    """Keeps target and owned assignments and runs one round at a time."""

    def __init__(
        self, config: MemberConfig, commits: CommitRequestManager, next_id: Callable[[], int]
    ) -> None:
        self._config = config
        self._commits = commits
        self._next_id = next_id
        self.target: frozenset[TopicIdPartition] = frozenset()
        self.target_local_epoch = 0
        self.current: frozenset[TopicIdPartition] = frozenset()
        self.current_local_epoch = 0
        self.topic_names: dict[uuid.UUID, str] = {}
        self.round: _Round | None = None
        self._metadata_retry_at_ms: int | None = None
        self._metadata_requested: frozenset[uuid.UUID] = frozenset()
        self._metadata_outstanding = False

    # --- target and names -------------------------------------------------------------------

    def set_target(self, assignment: AssignmentMap) -> bool:
        """Replace the target; bump the local epoch when its content changed. True if changed."""
        target = flatten_assignment(assignment)
        if target == self.target:
            return False
        self.target = target
        self.target_local_epoch += 1
        return True

    def reset(self) -> None:
        """Forget target, owned assignment and names (join, leave, fatal)."""
        self.target = frozenset()
        self.current = frozenset()
        self.target_local_epoch = 0
        self.current_local_epoch = 0
        self.topic_names.clear()
        self.round = None
        self._metadata_retry_at_ms = None
        self._metadata_requested = frozenset()
        self._metadata_outstanding = False

    def learn_names(self, names: Mapping[uuid.UUID, str]) -> None:
        """Add metadata answers to the name cache."""
        self.topic_names.update(names)
        self._metadata_outstanding = False

    @property
    def owned_named(self) -> tuple[TopicPartition, ...]:
        """The owned partitions, by name, sorted."""
        return name_partitions(self.current, self.topic_names)

    def target_reached(self) -> bool:
        """True when the owned assignment is the whole target at the target's local epoch."""
        return self.target == self.current and self.target_local_epoch == self.current_local_epoch

    # --- starting rounds --------------------------------------------------------------------

    def start_reconcile(self, now_ms: int, out: list[Command]) -> ReconcileStart:
        """Start a reconciliation round if one is needed and none is running."""
        if self.round is not None:
            return ReconcileStart.IDLE
        split = resolve_target(self.target, self.topic_names)
        self._maybe_fetch_metadata(split.unresolved_topic_ids, now_ms, out)
        if split.resolved == self.current:
            if self.target_local_epoch == self.current_local_epoch:
                return ReconcileStart.IDLE if split.unresolved_topic_ids else ReconcileStart.SETTLED
            if split.unresolved_topic_ids and self._metadata_outstanding:
                return ReconcileStart.IDLE  # give metadata one answer before a partial ack
            self.current_local_epoch = self.target_local_epoch
            return ReconcileStart.ACKNOWLEDGE
        plan = plan_round(self.current, split.resolved)
        self.round = _Round(
            kind=RoundKind.RECONCILE,
            local_epoch=self.target_local_epoch,
            resolved=split.resolved,
            revoked=name_partitions(plan.revoked, self.topic_names),
            added=name_partitions(plan.added, self.topic_names),
            assigned=name_partitions(split.resolved, self.topic_names),
            deadline_ms=now_ms + self._config.rebalance_timeout_ms,
        )
        self._begin_revocation(self.round, CommitReason.PRE_REVOKE, now_ms, out)
        return ReconcileStart.STARTED

    def _maybe_fetch_metadata(
        self, unresolved: frozenset[uuid.UUID], now_ms: int, out: list[Command]
    ) -> None:
        if not unresolved:
            self._metadata_retry_at_ms = None
            self._metadata_requested = frozenset()
            return
        retry_due = self._metadata_retry_at_ms is not None and now_ms >= self._metadata_retry_at_ms
        if unresolved != self._metadata_requested or retry_due:
            out.append(FetchMetadata(tuple(sorted(unresolved, key=str))))
            self._metadata_requested = unresolved
            self._metadata_outstanding = True
            self._metadata_retry_at_ms = now_ms + self._config.retry_backoff_max_ms

    def start_release(
        self, kind: RoundKind, now_ms: int, out: list[Command], commit_reason: CommitReason
    ) -> RoundResult | None:
        """Release every owned partition (REVOKE_ALL or LOSE_ALL); aborts a running round."""
        self.round = _Round(
            kind=kind,
            local_epoch=self.current_local_epoch,
            resolved=frozenset(),
            revoked=self.owned_named,
            added=(),
            assigned=(),
            deadline_ms=now_ms + self._config.rebalance_timeout_ms,
        )
        if not self.round.revoked:
            return self._finish(self.round, out)
        if kind is RoundKind.LOSE_ALL:
            # Lost partitions are not committed, so nothing waits for FetchingStopped.
            out.append(StopFetching(self._next_id(), self.round.revoked))
            self.round.phase = RoundPhase.LOSING
            self.round.callback_id = self._next_id()
            out.append(InvokeOnLost(self.round.callback_id, self.round.revoked))
            return None
        return self._begin_revocation(self.round, commit_reason, now_ms, out)

    # --- steps ------------------------------------------------------------------------------

    def _begin_revocation(
        self, rnd: _Round, reason: CommitReason, now_ms: int, out: list[Command]
    ) -> RoundResult | None:
        if not rnd.revoked:
            return self._begin_fetch(rnd, out)
        rnd.phase = RoundPhase.STOPPING
        rnd.commit_reason = reason
        rnd.waiting_id = self._next_id()
        out.append(StopFetching(rnd.waiting_id, rnd.revoked))
        return None

    def _commit_revoked(self, rnd: _Round, now_ms: int, out: list[Command]) -> RoundResult | None:
        if self._config.auto_commit:
            offsets = self._commits.uncommitted(rnd.revoked)
            job_id = self._commits.start_commit(
                rnd.commit_reason, offsets, now_ms, out, deadline_ms=rnd.deadline_ms
            )
            if job_id is not None:
                rnd.phase = RoundPhase.COMMITTING
                rnd.waiting_id = job_id
                return None
        return self._invoke_revoke(rnd, out)

    def _invoke_revoke(self, rnd: _Round, out: list[Command]) -> RoundResult | None:
        rnd.phase = RoundPhase.REVOKING
        rnd.callback_id = self._next_id()
        rnd.waiting_id = None
        out.append(InvokeOnRevoke(rnd.callback_id, rnd.revoked))
        return None

    def _begin_fetch(self, rnd: _Round, out: list[Command]) -> RoundResult | None:
        if rnd.kind is not RoundKind.RECONCILE:
            return self._finish(rnd, out)
        if not rnd.added:
            return self._begin_assign(rnd, out)
        rnd.phase = RoundPhase.FETCHING_OFFSETS
        rnd.waiting_id = self._commits.start_fetch(rnd.added, out)
        return None

    def _begin_assign(self, rnd: _Round, out: list[Command]) -> RoundResult | None:
        rnd.phase = RoundPhase.ASSIGNING
        rnd.waiting_id = self._next_id()
        rnd.callback_id = self._next_id()
        out.append(
            ApplyAssignment(
                request_id=rnd.waiting_id,
                assigned=rnd.assigned,
                added=rnd.added,
                removed=rnd.revoked,
                committed_offsets=dict(rnd.committed_offsets),
            )
        )
        out.append(InvokeOnAssign(rnd.callback_id, rnd.added))
        return None

    def _finish(self, rnd: _Round, out: list[Command], *, timed_out: bool = False) -> RoundResult:
        self.round = None
        if rnd.kind is RoundKind.RECONCILE:
            self.current = rnd.resolved
            self.current_local_epoch = rnd.local_epoch
            keep = topic_ids_of(self.current) | topic_ids_of(self.target)
            self.topic_names = {tid: n for tid, n in self.topic_names.items() if tid in keep}
        else:
            if rnd.revoked:
                out.append(ApplyAssignment(self._next_id(), (), (), rnd.revoked))
            self.current = frozenset()
        self._commits.forget(self.owned_named, out)
        return RoundResult(rnd.kind, timed_out)

    # --- answers ----------------------------------------------------------------------------

    def on_fetching_stopped(
        self, stopped: FetchingStopped, now_ms: int, out: list[Command]
    ) -> RoundResult | None:
        """Fetching of the revoked partitions stopped (its offsets are already recorded)."""
        rnd = self.round
        if rnd is None or rnd.phase is not RoundPhase.STOPPING:
            return None
        if rnd.waiting_id != stopped.request_id:
            return None
        return self._commit_revoked(rnd, now_ms, out)

    def on_commit_finished(self, job_id: int, out: list[Command]) -> RoundResult | None:
        """A commit job ended (success, failure or deadline): continue with the revocation."""
        rnd = self.round
        if rnd is None or rnd.phase is not RoundPhase.COMMITTING or rnd.waiting_id != job_id:
            return None
        return self._invoke_revoke(rnd, out)

    def on_revocation_completed(
        self, completed: RevocationCompleted, out: list[Command]
    ) -> RoundResult | None:
        """The application finished revoking (maybe with an error, which is reported)."""
        rnd = self.round
        if rnd is None or rnd.phase is not RoundPhase.REVOKING:
            return None
        if rnd.callback_id != completed.request_id:
            return None
        _report_callback_error("on_revoke", completed.error, out)
        revoked = set(rnd.revoked)
        self._commits.forget((tp for tp in self.owned_named if tp not in revoked), out)
        return self._begin_fetch(rnd, out)

    def on_offsets_fetched(
        self, job_id: int, offsets: Mapping[TopicPartition, int | None], out: list[Command]
    ) -> RoundResult | None:
        """Committed offsets for the added partitions arrived: hand them to the data plane."""
        rnd = self.round
        if rnd is None or rnd.phase is not RoundPhase.FETCHING_OFFSETS or rnd.waiting_id != job_id:
            return None
        rnd.committed_offsets = dict(offsets)
        return self._begin_assign(rnd, out)

    def on_assignment_applied(
        self, applied: AssignmentApplied, out: list[Command]
    ) -> RoundResult | None:
        """The data plane applied the round's assignment."""
        rnd = self.round
        if rnd is None or rnd.phase is not RoundPhase.ASSIGNING:
            return None
        if rnd.waiting_id != applied.request_id:
            return None
        rnd.applied = True
        return self._finish(rnd, out) if rnd.callback_done else None

    def on_callback_completed(
        self, completed: CallbackCompleted, out: list[Command]
    ) -> RoundResult | None:
        """``on_assign`` or ``on_lost`` finished (errors are reported, the round continues)."""
        rnd = self.round
        if rnd is None or rnd.callback_id != completed.request_id:
            return None
        if rnd.phase is RoundPhase.LOSING:
            _report_callback_error("on_lost", completed.error, out)
            return self._finish(rnd, out)
        if rnd.phase is not RoundPhase.ASSIGNING:
            return None
        _report_callback_error("on_assign", completed.error, out)
        rnd.callback_done = True
        return self._finish(rnd, out) if rnd.applied else None

    def check_deadline(self, now_ms: int, out: list[Command]) -> RoundResult | None:
        """Past the rebalance timeout, a revocation still not completed is given up on."""
        rnd = self.round
        if rnd is None or rnd.phase not in _BOUNDED_PHASES or now_ms < rnd.deadline_ms:
            return None
        parts = ", ".join(str(tp) for tp in rnd.revoked)
        out.append(
            ReportError(
                error_code=None,
                error_name="REVOCATION_TIMEOUT",
                message=f"revocation of {parts} not completed within the rebalance timeout",
                fatal=False,
            )
        )
        if rnd.kind is RoundKind.RECONCILE:
            self.round = None
            return RoundResult(rnd.kind, timed_out=True)
        return self._finish(rnd, out, timed_out=True)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`check_deadline` or a metadata retry has something to do."""
        times = []
        if self.round is not None and self.round.phase in _BOUNDED_PHASES:
            times.append(self.round.deadline_ms)
        if self._metadata_retry_at_ms is not None:
            times.append(self._metadata_retry_at_ms)
        return min(times) if times else None

    def abort(self) -> None:
        """Drop the running round; its late answers will be ignored.

        If the round already handed its assignment to the data plane, that assignment is what is
        owned now (so a following release names exactly the partitions the data plane holds).
        """
        rnd = self.round
        self.round = None
        if (
            rnd is not None
            and rnd.kind is RoundKind.RECONCILE
            and rnd.phase is RoundPhase.ASSIGNING
        ):
            self.current = rnd.resolved
            self.current_local_epoch = rnd.local_epoch


def _report_callback_error(callback: str, error: str | None, out: list[Command]) -> None:
    if error is not None:
        out.append(
            ReportError(
                error_code=None,
                error_name="CALLBACK_FAILED",
                message=f"{callback} failed: {error}",
                fatal=False,
            )
        )
