"""AssignmentManager: the target, the owned assignment, and the revoke-then-assign rounds.

A *round* moves the owned assignment towards a target through the phases declared in
:data:`consumer.member.rules.ROUND_STEPS` (a phase with nothing to do is skipped):

1. STOPPING: ``StopFetching(revoked)``, wait for ``FetchingStopped`` (it carries the offsets
   consumed up to that moment);
2. COMMITTING: ``CommitOffsets(reason=pre-revoke)`` of the revoked partitions' consumed offsets
   (auto-commit only; wait for the commit, bounded by the rebalance timeout);
3. REVOKING: ``InvokeOnRevoke(revoked)``, wait for ``RevocationCompleted`` (bounded by the
   rebalance timeout: past it the partitions are treated as lost and the member fences itself);
4. ASSIGNING: ``ApplyAssignment`` + ``InvokeOnAssign(added)`` (always, even when nothing is new),
   wait for both ``AssignmentApplied`` and ``CallbackCompleted``. When partitions are added,
   ``FetchCommittedOffsets(added)`` goes out with them and ``ApplyAssignment`` names them as
   waiting for that fetch (``awaiting_start``): the round does not wait for it, so the ack does
   not wait for the OffsetFetch round trip (as Java's member, which runs
   ``onPartitionsAssigned`` and acknowledges before it initialises positions). When the fetch
   ends, ``StartFetching`` tells the application thread where they start: at their committed
   offsets; the others, when ``auto.offset.reset`` is earliest or latest, wait for a
   ``ListStartOffsets`` sent at the same moment (its ``StartOffsetsListed`` becomes a second
   ``StartFetching``, so the data plane gets absolute offsets and looks nothing up on the
   application thread), else start at the reset policy's logical offset. A fetch that fails
   with a non-retriable error is reported and the reset policy applies;
5. the owned assignment becomes the round's target: the round reports ROUND_FINISHED.

Releasing everything (leaving: REVOKE_ALL, phases 1-3; fencing, staleness, fatal errors: LOSE_ALL,
the LOSING phase with ``InvokeOnLost`` and no commit) reports RELEASED.

A new target arriving mid-round replaces the target and bumps the local epoch; the running round
still finishes on its own plan (so its ack names exactly what is owned), and the next round starts
from there. Fencing aborts a round: late answers to it are ignored.

Every method returns the commands it decided and, where something finished, an
:class:`~consumer.member.rules.Outcome` for the rules table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from consumer.member.commands import (
    ApplyAssignment,
    Command,
    CommitReason,
    FetchMetadata,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ListStartOffsets,
    ReportError,
    StartFetching,
    StopFetching,
)
from consumer.member.commit import CommitRequestManager
from consumer.member.config import MemberConfig
from consumer.member.inputs import (
    AssignmentApplied,
    CallbackCompleted,
    FetchingStopped,
    RevocationCompleted,
    StartOffsetsListed,
)
from consumer.member.machine import StepCursor
from consumer.member.partitions import (
    Assignment,
    TopicIdPartition,
    TopicPartition,
)
from consumer.member.reconcile import name_partitions, plan_round, resolve_target, topic_ids_of
from consumer.member.round import (
    Round,
    Step,
    callback_error,
    nothing,
    partitions_to_reset,
    reset_policy,
)
from consumer.member.rules import (
    PHASES,
    ROUND_OUTCOMES,
    ROUND_STEPS,
    Outcome,
    RoundKind,
    RoundPhase,
    Skip,
)


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
        self.round: Round | None = None
        self._metadata_retry_at_ms: int | None = None
        self._metadata_requested: frozenset[uuid.UUID] = frozenset()
        self._metadata_outstanding = False

    # --- target and names -------------------------------------------------------------------

    def set_target(self, target: Assignment) -> bool:
        """Replace the target; bump the local epoch when its content changed. True if changed."""
        if target == self.target:
            return False
        self.target = target
        self.target_local_epoch += 1
        return True

    def reset(self) -> None:
        """Forget target, owned assignment and names (join, leave)."""
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

    @property
    def reported_owned(self) -> frozenset[TopicIdPartition]:
        """What heartbeats report as owned: the owned partitions, the target's, and those of
        the running round (which may still hand them to the application).

        The coordinator releases a partition pending revocation as soon as a heartbeat leaves
        it out. Reporting only the reconciled partitions (as Java does) lets a full heartbeat
        sent mid-round (after any error) release partitions this member is about to pass to
        ``on_assign``, with committed offsets fetched before the next owner commits: both then
        process the same records. Reporting more only delays a release until the member has
        revoked (the coordinator uses the owned set for nothing else).
        """
        rnd = self.round
        pending = self.target if rnd is None else self.target | rnd.resolved
        return self.current if pending <= self.current else self.current | pending

    def target_reached(self) -> bool:
        """True when the owned assignment is the whole target at the target's local epoch."""
        return self.target == self.current and self.target_local_epoch == self.current_local_epoch

    # --- starting rounds --------------------------------------------------------------------

    def start_reconcile(self, now_ms: int) -> Step:
        """Start a reconciliation round if one is needed and none is running.

        Outcomes: TARGET_REACHED (nothing to do), TARGET_EPOCH_ADVANCED (owned partitions
        unchanged, newer target: acknowledge), or None (a round runs, started, or waits for names).
        """
        if self.round is not None:
            return nothing()
        split = resolve_target(self.target, self.topic_names)
        commands = self._maybe_fetch_metadata(split.unresolved_topic_ids, now_ms)
        if split.resolved == self.current:
            if self.target_local_epoch == self.current_local_epoch:
                return commands, None if split.unresolved_topic_ids else Outcome.TARGET_REACHED
            if split.unresolved_topic_ids and self._metadata_outstanding:
                return commands, None  # give metadata one answer before a partial ack
            self.current_local_epoch = self.target_local_epoch
            return commands, Outcome.TARGET_EPOCH_ADVANCED
        plan = plan_round(self.current, split.resolved)
        self.round = Round(
            kind=RoundKind.RECONCILE,
            local_epoch=self.target_local_epoch,
            resolved=split.resolved,
            revoked=name_partitions(plan.revoked, self.topic_names),
            added=name_partitions(plan.added, self.topic_names),
            assigned=name_partitions(split.resolved, self.topic_names),
            deadline_ms=now_ms + self._config.rebalance_timeout_ms,
            commit_reason=CommitReason.PRE_REVOKE,
            steps=StepCursor(ROUND_STEPS[RoundKind.RECONCILE]),
        )
        step_commands, outcome = self._next_phase(self.round, now_ms)
        return commands + step_commands, outcome

    def _maybe_fetch_metadata(self, unresolved: frozenset[uuid.UUID], now_ms: int) -> list[Command]:
        if not unresolved:
            self._metadata_retry_at_ms = None
            self._metadata_requested = frozenset()
            return []
        retry_due = self._metadata_retry_at_ms is not None and now_ms >= self._metadata_retry_at_ms
        if unresolved != self._metadata_requested or retry_due:
            self._metadata_requested = unresolved
            self._metadata_outstanding = True
            self._metadata_retry_at_ms = now_ms + self._config.retry_backoff_max_ms
            return [FetchMetadata(tuple(sorted(unresolved, key=str)))]
        return []

    def start_release(self, kind: RoundKind, now_ms: int, commit_reason: CommitReason) -> Step:
        """Release every owned partition (REVOKE_ALL or LOSE_ALL); replaces a running round."""
        self.round = Round(
            kind=kind,
            local_epoch=self.current_local_epoch,
            resolved=frozenset(),
            revoked=self.owned_named,
            added=(),
            assigned=(),
            deadline_ms=now_ms + self._config.rebalance_timeout_ms,
            commit_reason=commit_reason,
            steps=StepCursor(ROUND_STEPS[kind]),
        )
        return self._next_phase(self.round, now_ms)

    # --- phases -----------------------------------------------------------------------------

    def _skips(self, rnd: Round, phase: RoundPhase) -> bool:
        reason = PHASES[phase].skipped_when
        if reason is Skip.NOTHING_REVOKED:
            return not rnd.revoked
        if reason is Skip.NOTHING_TO_COMMIT:
            return not self._config.auto_commit or not self._commits.uncommitted(rnd.revoked)
        return False

    def _next_phase(self, rnd: Round, now_ms: int) -> Step:
        """Enter the next phase that has something to do, or finish the round."""
        phase = rnd.steps.advance(lambda candidate: self._skips(rnd, candidate))
        if phase is None:
            return self._finish(rnd)
        rnd.waiting_id = None
        commands: list[Command]
        if phase is RoundPhase.STOPPING:
            rnd.waiting_id = self._next_id()
            commands = [StopFetching(rnd.waiting_id, rnd.revoked)]
        elif phase is RoundPhase.COMMITTING:
            offsets = self._commits.uncommitted(rnd.revoked)
            rnd.waiting_id, commands = self._commits.start_commit(
                rnd.commit_reason, offsets, now_ms, deadline_ms=rnd.deadline_ms
            )
        elif phase is RoundPhase.REVOKING:
            rnd.callback_id = self._next_id()
            commands = [InvokeOnRevoke(rnd.callback_id, rnd.revoked)]
        elif phase is RoundPhase.LOSING:
            # Lost partitions are not committed, so nothing waits for FetchingStopped.
            commands = [StopFetching(self._next_id(), rnd.revoked)]
            rnd.callback_id = self._next_id()
            commands.append(InvokeOnLost(rnd.callback_id, rnd.revoked))
        else:
            commands = self._assign(rnd)
        return commands, None

    def _assign(self, rnd: Round) -> list[Command]:
        """The ASSIGNING phase's commands: the assignment, ``on_assign``, and the fetch of the
        added partitions' committed offsets (not waited for: see the module docstring)."""
        rnd.waiting_id = self._next_id()
        rnd.callback_id = self._next_id()
        fetch_id: int | None = None
        fetch: list[Command] = []
        if rnd.added:
            fetch_id, fetch = self._commits.start_fetch(rnd.added)
        apply = ApplyAssignment(
            request_id=rnd.waiting_id,
            assigned=rnd.assigned,
            added=rnd.added,
            removed=rnd.revoked,
            awaiting_start=rnd.added,
            start_request_id=fetch_id,
        )
        return [apply, InvokeOnAssign(rnd.callback_id, rnd.added), *fetch]

    def _finish(self, rnd: Round) -> Step:
        self.round = None
        commands: list[Command] = []
        if rnd.kind is RoundKind.RECONCILE:
            self.current = rnd.resolved
            self.current_local_epoch = rnd.local_epoch
            keep = topic_ids_of(self.current) | topic_ids_of(self.target)
            self.topic_names = {tid: n for tid, n in self.topic_names.items() if tid in keep}
        else:
            if rnd.revoked:
                commands.append(ApplyAssignment(self._next_id(), (), (), rnd.revoked))
            self.current = frozenset()
        commands += self._commits.forget(self.owned_named)
        return commands, ROUND_OUTCOMES[rnd.kind]

    def _waiting(self, phase: RoundPhase) -> Round | None:
        """The running round if it is in ``phase``."""
        rnd = self.round
        return rnd if rnd is not None and rnd.phase is phase else None

    # --- answers ----------------------------------------------------------------------------

    def on_fetching_stopped(self, stopped: FetchingStopped, now_ms: int) -> Step:
        """Fetching of the revoked partitions stopped (its offsets are already recorded)."""
        rnd = self._waiting(RoundPhase.STOPPING)
        if rnd is None or rnd.waiting_id != stopped.request_id:
            return nothing()
        return self._next_phase(rnd, now_ms)

    def on_commit_finished(self, job_id: int, now_ms: int) -> Step:
        """A commit job ended (success, failure or deadline): continue with the revocation."""
        rnd = self._waiting(RoundPhase.COMMITTING)
        if rnd is None or rnd.waiting_id != job_id:
            return nothing()
        return self._next_phase(rnd, now_ms)

    def on_revocation_completed(self, completed: RevocationCompleted, now_ms: int) -> Step:
        """The application finished revoking (maybe with an error, which is reported)."""
        rnd = self._waiting(RoundPhase.REVOKING)
        if rnd is None or rnd.callback_id != completed.request_id:
            return nothing()
        commands = callback_error("on_revoke", completed.error)
        revoked = set(rnd.revoked)
        commands += self._commits.forget(tp for tp in self.owned_named if tp not in revoked)
        more, outcome = self._next_phase(rnd, now_ms)
        return commands + more, outcome

    def on_offsets_fetched(self, job_id: int, offsets: Mapping[TopicPartition, int | None]) -> Step:
        """A committed-offsets fetch job ended: the partitions waiting for it start at their
        committed offsets; those with nothing committed wait for the reset policy's lookup when
        there is one (earliest, latest), else start at its logical offset.

        The round may be over, or may have revoked some of them: only the application thread
        knows which still wait, so the answer goes there whole (it ignores the others).
        """
        committed = {tp: offset for tp, offset in offsets.items() if offset is not None}
        policy = reset_policy(self._config.auto_offset_reset)
        to_reset = partitions_to_reset(tuple(offsets), committed) if policy else ()
        if policy is None or not to_reset:
            return [StartFetching(job_id, committed)], None
        listing = self._next_id()
        read_committed = self._config.isolation_level == "read_committed"
        return [
            StartFetching(job_id, committed, then_request_id=listing),
            ListStartOffsets(listing, to_reset, policy, read_committed),
        ], None

    def on_start_offsets_listed(self, listed: StartOffsetsListed) -> Step:
        """The reset policy's start offsets arrived: the application thread starts fetching the
        partitions waiting for them (those absent from the answer at the logical offset). It
        alone knows which still wait (an answer may come after they were revoked)."""
        offsets = {tp: offset for tp, offset in listed.offsets.items() if offset >= 0}
        return [StartFetching(listed.request_id, offsets)], None

    def on_assignment_applied(self, applied: AssignmentApplied, now_ms: int) -> Step:
        """The data plane applied the round's assignment."""
        rnd = self._waiting(RoundPhase.ASSIGNING)
        if rnd is None or rnd.waiting_id != applied.request_id:
            return nothing()
        rnd.applied = True
        return self._next_phase(rnd, now_ms) if rnd.callback_done else nothing()

    def on_callback_completed(self, completed: CallbackCompleted, now_ms: int) -> Step:
        """``on_assign`` or ``on_lost`` finished (errors are reported, the round continues)."""
        rnd = self.round
        if rnd is None or rnd.callback_id != completed.request_id:
            return nothing()
        if rnd.phase is RoundPhase.LOSING:
            commands = callback_error("on_lost", completed.error)
        elif rnd.phase is RoundPhase.ASSIGNING:
            commands = callback_error("on_assign", completed.error)
            rnd.callback_done = True
            if not rnd.applied:
                return commands, None
        else:
            return nothing()
        more, outcome = self._next_phase(rnd, now_ms)
        return commands + more, outcome

    def poll(self, now_ms: int) -> Step:
        """Past the rebalance timeout, a revocation still not completed is given up on."""
        rnd = self.round
        if rnd is None or rnd.phase is None or not PHASES[rnd.phase].bounded:
            return nothing()
        if now_ms < rnd.deadline_ms:
            return nothing()
        parts = ", ".join(str(tp) for tp in rnd.revoked)
        report = ReportError(
            error_code=None,
            error_name="REVOCATION_TIMEOUT",
            message=f"revocation of {parts} not completed within the rebalance timeout",
            fatal=False,
        )
        if rnd.kind is RoundKind.RECONCILE:
            self.round = None
            return [report], Outcome.ROUND_TIMED_OUT
        commands, outcome = self._finish(rnd)
        return [report, *commands], outcome

    def next_deadline_ms(self) -> int | None:
        """When :meth:`poll` or a metadata retry has something to do."""
        times = []
        rnd = self.round
        if rnd is not None and rnd.phase is not None and PHASES[rnd.phase].bounded:
            times.append(rnd.deadline_ms)
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
