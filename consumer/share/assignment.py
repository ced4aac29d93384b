"""ShareAssignmentManager: the target, what the data plane fetches, and the rounds between them.

A *round* (:data:`consumer.share.rules.SHARE_ROUND_STEPS`; a phase with nothing to do is
skipped):

1. STOPPING: ``StopAndFlush(removed)``, wait for ``StoppedAndFlushed``: the data plane stops
   fetching the partitions that left the target and sends their pending acknowledgements before
   the member forgets them;
2. APPLYING (reconcile rounds only): ``ApplyShareAssignment(target)``, wait for
   ``ShareAssignmentApplied``;
3. the owned assignment becomes the round's target: the round reports ROUND_FINISHED (a release
   round, which stops everything, reports RELEASED).

Two sets are kept: ``owned`` (confirmed by the data plane) and ``fetching`` (what the data plane
was last told to fetch, updated when a command is sent). A release stops ``fetching``, so it also
covers an ``ApplyShareAssignment`` still unanswered (the data plane runs commands in order). A new
target arriving mid-round replaces the target; the running round finishes on its own plan and the
next round starts from there. Aborting a round makes late answers to it be ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from consumer.member.machine import StepCursor
from consumer.member.partitions import Assignment, TopicIdPartition
from consumer.share.commands import ApplyShareAssignment, ShareCommand, StopAndFlush
from consumer.share.inputs import ShareAssignmentApplied, StoppedAndFlushed
from consumer.share.rules import (
    SHARE_ROUND_OUTCOMES,
    SHARE_ROUND_STEPS,
    ShareOutcome,
    ShareRoundKind,
    ShareRoundPhase,
)

#: Commands decided, and the outcome to hand to the rules (None: nothing finished).
ShareStep = tuple[list[ShareCommand], ShareOutcome | None]


@dataclass
class _Round:
    kind: ShareRoundKind
    target: Assignment
    removed: frozenset[TopicIdPartition]
    added: frozenset[TopicIdPartition]
    cursor: StepCursor[ShareRoundPhase] = field(init=False)
    request_id: int | None = None

    def __post_init__(self) -> None:
        self.cursor = StepCursor(SHARE_ROUND_STEPS[self.kind])


def _sorted(partitions: frozenset[TopicIdPartition]) -> tuple[TopicIdPartition, ...]:
    return tuple(sorted(partitions, key=lambda tp: (str(tp.topic_id), tp.partition)))


class ShareAssignmentManager:
    """Target vs. fetched partitions, and the stop-flush-apply rounds that close the gap."""

    def __init__(self, next_id: Callable[[], int]) -> None:
        self._next_id = next_id
        self.target: Assignment = frozenset()
        self.owned: Assignment = frozenset()
        self.fetching: Assignment = frozenset()
        self.round: _Round | None = None

    @property
    def phase(self) -> ShareRoundPhase | None:
        """The phase of the running round (None when no round runs)."""
        return None if self.round is None else self.round.cursor.current

    def set_target(self, target: Assignment) -> None:
        """The coordinator's latest target."""
        self.target = frozenset(target)

    def target_reached(self) -> bool:
        """True when the data plane fetches exactly the target (confirmed)."""
        return self.owned == self.target and self.fetching == self.target

    def reset(self) -> None:
        """Forget the target and the owned partitions (only once nothing is fetched)."""
        self.abort()
        self.target = frozenset()
        self.owned = frozenset()

    def abort(self) -> None:
        """Drop the running round; its late answers are ignored. What was stopped is not owned."""
        self.round = None
        self.owned = self.owned & self.fetching

    # --- starting rounds --------------------------------------------------------------------

    def start_reconcile(self) -> ShareStep:
        """Start a round towards the target unless one runs (TARGET_REACHED when none is
        needed)."""
        if self.round is not None:
            return [], None
        if self.target_reached():
            return [], ShareOutcome.TARGET_REACHED
        target = self.target
        rnd = _Round(
            ShareRoundKind.RECONCILE,
            target,
            removed=self.fetching - target,
            added=target - self.fetching,
        )
        self.round = rnd
        return self._next_phase(rnd)

    def start_release(self) -> ShareStep:
        """Stop fetching everything and flush (aborts a running round)."""
        self.abort()
        rnd = _Round(ShareRoundKind.RELEASE, frozenset(), removed=self.fetching, added=frozenset())
        self.round = rnd
        return self._next_phase(rnd)

    # --- phases -----------------------------------------------------------------------------

    def _next_phase(self, rnd: _Round) -> ShareStep:
        phase = rnd.cursor.advance(
            lambda step: step is ShareRoundPhase.STOPPING and not rnd.removed
        )
        if phase is None:
            self.round = None
            self.owned = rnd.target
            return [], SHARE_ROUND_OUTCOMES[rnd.kind]
        request_id = self._next_id()
        rnd.request_id = request_id
        if phase is ShareRoundPhase.STOPPING:
            self.fetching = self.fetching - rnd.removed
            return [StopAndFlush(request_id, _sorted(rnd.removed))], None
        self.fetching = rnd.target
        command = ApplyShareAssignment(
            request_id,
            assigned=_sorted(rnd.target),
            added=_sorted(rnd.added),
            removed=_sorted(rnd.removed),
        )
        return [command], None

    def _answers(self, phase: ShareRoundPhase, request_id: int) -> _Round | None:
        rnd = self.round
        if rnd is None or rnd.cursor.current is not phase or rnd.request_id != request_id:
            return None
        return rnd

    def on_stopped(self, answer: StoppedAndFlushed) -> ShareStep:
        """The data plane stopped and flushed: next phase (late or unknown answers: nothing)."""
        rnd = self._answers(ShareRoundPhase.STOPPING, answer.request_id)
        return ([], None) if rnd is None else self._next_phase(rnd)

    def on_applied(self, answer: ShareAssignmentApplied) -> ShareStep:
        """The data plane applied the target: the round finishes."""
        rnd = self._answers(ShareRoundPhase.APPLYING, answer.request_id)
        return ([], None) if rnd is None else self._next_phase(rnd)
