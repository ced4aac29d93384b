"""The verdict on a simulated run: the shared invariant checker plus two ownership checks.

:func:`consumer.testing.invariants.check` finds partitions owned twice at once (so a partition
assigned before its previous owner revoked it), commits going backwards, lost records and
unexplained duplicates. A member that went STALE (its application missed ``max.poll.interval.ms``)
lost its membership and its uncommitted work exactly as a fenced one does, so the checker is told
so. A simulation also knows exactly when each member owned what, so it adds:

* ``commit_by_non_owner``: a commit the coordinator accepted from a member that did not own the
  partition then (with KIP-848 the broker accepts any current member's commit at its epoch: a
  listener that commits revoked partitions overwrites the new owner's progress);
* ``record_after_release``: a record handed to the application of a partition its member did not
  own then (for example after ``on_revoke`` returned).
"""

from __future__ import annotations

from collections import defaultdict

from consumer.testing.invariants import CheckReport, check
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import (
    FENCE,
    Commit,
    Fault,
    Ownership,
    Processed,
    StateChange,
)

__all__ = ["COMMIT_BY_NON_OWNER", "RECORD_AFTER_RELEASE", "verdict"]

COMMIT_BY_NON_OWNER = "commit_by_non_owner"
RECORD_AFTER_RELEASE = "record_after_release"

_Key = tuple[str, str, int]  # member, topic, partition


def verdict(timeline: Timeline, session_timeout_ms: int | None = None) -> CheckReport:
    """Check a simulated run's timeline (see the module docstring)."""
    events = timeline.events()
    went_stale = [
        Fault(FENCE, event.member, event.at_ms, event.at_ms)
        for event in events
        if isinstance(event, StateChange) and event.state == "STALE"
    ]
    report = check([*events, *went_stale], session_timeout_ms=session_timeout_ms)
    spans: dict[_Key, list[tuple[int, float]]] = defaultdict(list)
    for event in events:
        if isinstance(event, Ownership):
            end = float("inf") if event.owned_to_ms is None else event.owned_to_ms
            spans[(event.member, event.topic, event.partition)].append((event.owned_from_ms, end))

    def owned(member: str, topic: str, partition: int, at_ms: int) -> bool:
        return any(start <= at_ms <= end for start, end in spans[(member, topic, partition)])

    for event in events:
        if isinstance(event, Commit) and not owned(
            event.member, event.topic, event.partition, event.at_ms
        ):
            report.add(
                COMMIT_BY_NON_OWNER,
                f"{event.member} committed {event.topic}[{event.partition}] offset "
                f"{event.offset} at {event.at_ms} without owning the partition then",
            )
        elif isinstance(event, Processed) and not owned(
            event.member, event.topic, event.partition, event.at_ms
        ):
            report.add(
                RECORD_AFTER_RELEASE,
                f"{event.member} received {event.topic}[{event.partition}] offset "
                f"{event.offset} at {event.at_ms} without owning the partition then",
            )
    return report
