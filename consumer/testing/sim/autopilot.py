"""Answer a member's commands like a well-behaved runtime and application.

A :class:`~consumer.member.Member` asks for work with commands and waits for the answers as
inputs. :class:`Autopilot` gives the answer a runtime and an application that do everything at
once and without failure would give: metadata resolved, offsets fetched and committed, fetching
stopped, revocations and callbacks completed, assignments applied. What the answers carry
(topic names, committed offsets, commit results, consumed offsets) comes from the callables a
driver plugs in: :class:`~consumer.testing.sim.harness.GroupHarness` takes them from its simulated
coordinator and data plane, a single-member rig from its own fields.

Commands that start an exchange with the coordinator (``SendHeartbeat``, ``FindCoordinator``),
or only report (``ReportError``, ``ReportCommitResult``, ``ShutDown``), get no answer here: they
are the driver's business. :func:`answer_pending` answers every command of a member's command log
until nothing new is left to answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from consumer.member import (
    ApplyAssignment,
    AssignmentApplied,
    CallbackCompleted,
    Command,
    CommitCompleted,
    CommitOffsets,
    CommittedOffsetsFetched,
    FetchCommittedOffsets,
    FetchingStopped,
    FetchMetadata,
    Input,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ListStartOffsets,
    MetadataResolved,
    RevocationCompleted,
    StartOffsetsListed,
    StopFetching,
    TopicPartition,
)

__all__ = ["Autopilot", "answer_pending"]


def _no_topics(_: FetchMetadata) -> Mapping[uuid.UUID, str]:
    return {}


def _nothing_committed(command: FetchCommittedOffsets) -> CommittedOffsetsFetched:
    return CommittedOffsetsFetched(command.request_id, dict.fromkeys(command.partitions))


def _empty_partitions(command: ListStartOffsets) -> StartOffsetsListed:
    return StartOffsetsListed(command.request_id, dict.fromkeys(command.partitions, 0))


def _commit_accepted(command: CommitOffsets) -> CommitCompleted:
    return CommitCompleted(command.request_id, dict.fromkeys(command.offsets, 0))


def _nothing_consumed(_: StopFetching) -> Mapping[TopicPartition, int]:
    return {}


@dataclass(frozen=True)
class Autopilot:
    """How a well-behaved runtime and application answer a member's commands.

    Attributes:
        topic_names: the names metadata finds for a ``FetchMetadata`` (ids it does not know are
            left out); by default none.
        fetch_committed: the ``OffsetFetch`` answer; by default nothing committed.
        list_start_offsets: the ``ListOffsets`` answer; by default every partition is empty
            (its log start and end are 0).
        commit: the ``OffsetCommit`` answer; by default every partition accepted.
        consumed_at_stop: the consumed offsets a ``FetchingStopped`` reports; by default none.
    """

    topic_names: Callable[[FetchMetadata], Mapping[uuid.UUID, str]] = _no_topics
    fetch_committed: Callable[[FetchCommittedOffsets], CommittedOffsetsFetched] = _nothing_committed
    list_start_offsets: Callable[[ListStartOffsets], StartOffsetsListed] = _empty_partitions
    commit: Callable[[CommitOffsets], CommitCompleted] = _commit_accepted
    consumed_at_stop: Callable[[StopFetching], Mapping[TopicPartition, int]] = _nothing_consumed

    def answer(self, command: Command) -> Input | None:
        """The input that answers ``command``, or ``None`` when it is not one to answer."""
        match command:
            case FetchMetadata():
                return MetadataResolved(dict(self.topic_names(command)))
            case FetchCommittedOffsets():
                return self.fetch_committed(command)
            case ListStartOffsets():
                return self.list_start_offsets(command)
            case CommitOffsets():
                return self.commit(command)
            case StopFetching():
                return FetchingStopped(command.request_id, dict(self.consumed_at_stop(command)))
            case InvokeOnRevoke():
                return RevocationCompleted(command.request_id)
            case InvokeOnAssign() | InvokeOnLost():
                return CallbackCompleted(command.request_id)
            case ApplyAssignment():
                return AssignmentApplied(command.request_id)
            case _:
                return None


def answer_pending(
    log: Sequence[Command],
    answer: Callable[[Command], object],
    *,
    after_round: Callable[[], object] | None = None,
    max_rounds: int = 50,
) -> None:
    """Pass every command of ``log`` to ``answer`` once, in order, until a round finds none new.

    ``answer`` feeds the member (which appends what it emits to ``log``); ``after_round`` runs
    after each round (a rig that must poll the member to get its next commands polls there).
    Stops after ``max_rounds`` rounds.
    """
    answered: set[int] = set()
    for _ in range(max_rounds):
        pending = [command for command in log if id(command) not in answered]
        if not pending:
            return
        for command in pending:
            answered.add(id(command))
            answer(command)
        if after_round is not None:
            after_round()
