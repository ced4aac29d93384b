"""One reconciliation or release round's data, and the pure helpers of its phases.

:class:`~consumer.member.assignment.AssignmentManager` runs the rounds; this module holds what
a round remembers and the decisions that need nothing else: which added partitions need their
start offsets looked up (when their committed-offsets fetch ends), and how a failed callback is
reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from consumer.member.commands import Command, CommitReason, ReportError, ResetPolicy
from consumer.member.machine import StepCursor
from consumer.member.partitions import TopicIdPartition, TopicPartition
from consumer.member.rules import Outcome, RoundKind, RoundPhase

#: What a manager step decided: commands to run, and an outcome for the rules (or None).
Step = tuple[list[Command], Outcome | None]

#: ``auto.offset.reset`` values whose start offsets the round looks up (``error`` is not one).
_LISTED_POLICIES: dict[str, ResetPolicy] = {policy.value: policy for policy in ResetPolicy}


def nothing() -> Step:
    """A step that decided nothing."""
    return [], None


@dataclass(slots=True)
class Round:
    """A running round: its plan, the phase it is in, and what its phases learned."""

    kind: RoundKind
    local_epoch: int
    resolved: frozenset[TopicIdPartition]
    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    assigned: tuple[TopicPartition, ...]
    deadline_ms: int
    commit_reason: CommitReason
    steps: StepCursor[RoundPhase]
    waiting_id: int | None = None
    callback_id: int | None = None
    applied: bool = False
    callback_done: bool = False

    @property
    def phase(self) -> RoundPhase | None:
        """The phase the round is in (None before the first and after the last)."""
        return self.steps.current


def reset_policy(auto_offset_reset: str) -> ResetPolicy | None:
    """The policy whose start offsets are looked up, or None (``error``: the data plane's)."""
    return _LISTED_POLICIES.get(auto_offset_reset)


def partitions_to_reset(
    added: tuple[TopicPartition, ...], committed: Mapping[TopicPartition, int | None]
) -> tuple[TopicPartition, ...]:
    """The added partitions that start where the reset policy says: nothing committed."""
    return tuple(tp for tp in added if committed.get(tp) is None)


def callback_error(callback: str, error: str | None) -> list[Command]:
    """The report of a failed rebalance callback (nothing when it succeeded)."""
    if error is None:
        return []
    return [
        ReportError(
            error_code=None,
            error_name="CALLBACK_FAILED",
            message=f"{callback} failed: {error}",
            fatal=False,
        )
    ]
