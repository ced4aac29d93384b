"""The KIP-848 case studies, ready to run against the application's own listeners.

Each :class:`CaseStudy` is the KIP's example written with the scenario steps of
:mod:`consumer.testing.sim.steps`, plus what the KIP says must come out of it: the final
assignment of topic ``foo``, and the partitions that move from one member to another (the old
owner's ``on_revoke`` must return before the new owner's ``on_assign`` starts). Run one with the
application's listener and poll loop::

    result = case_study("members_joining_one_by_one").run(listener=MyListener)
    assert result.ok, result.report.summary()

:meth:`CaseStudy.problems` lists where a result departs from the KIP (empty when it follows it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from consumer.testing.sim.group import GroupSim, Loop, SimResult
from consumer.testing.sim.steps import Step, add_partitions, crash, join, until_stable
from consumer.testing.timeline_events import Ownership

__all__ = ["CASE_STUDIES", "CaseStudy", "case_study"]

TOPIC = "foo"


@dataclass(frozen=True)
class CaseStudy:
    """One KIP-848 case study (see the module docstring).

    Attributes:
        name: a short identifier.
        summary: what happens, in the KIP's words.
        partitions: partitions of topic ``foo`` at the start.
        steps: the scenario.
        expected: final partitions of ``foo`` per member.
        handovers: ``(from, to, partition)``: ``partition`` moves from one live member to another
            through a revocation.
        session_timeout_ms: the coordinator's session timeout.
    """

    name: str
    summary: str
    partitions: int
    steps: tuple[Step, ...]
    expected: Mapping[str, tuple[int, ...]]
    handovers: tuple[tuple[str, str, int], ...] = ()
    session_timeout_ms: int = 45_000
    config: Mapping[str, Any] = field(default_factory=dict)

    def run(
        self,
        *,
        seed: int = 0,
        listener: Callable[[], object] | None = None,
        loop: Loop | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> SimResult:
        """Run the case study with the application's listener factory and poll loop."""
        sim = GroupSim(
            {TOPIC: self.partitions},
            seed=seed,
            listener=listener,
            loop=loop,
            config={**self.config, **(config or {})},
            session_timeout_ms=self.session_timeout_ms,
        )
        return sim.run(self.steps)

    def problems(self, result: SimResult) -> list[str]:
        """Where ``result`` departs from the KIP: final assignment, handovers, the verdict."""
        found = [f"[{v.invariant}] {v.message}" for v in result.report.violations]
        final = {
            member: tuple(sorted(p for topic, p in owned if topic == TOPIC))
            for member, owned in result.assignments.items()
        }
        if final != dict(self.expected):
            found.append(f"final assignment {final}, the KIP says {dict(self.expected)}")
        spans = [e for e in result.timeline.events() if isinstance(e, Ownership)]
        for old, new, partition in self.handovers:
            released = [
                s.owned_to_ms
                for s in spans
                if s.member == old and s.partition == partition and s.owned_to_ms is not None
            ]
            taken = [s.owned_from_ms for s in spans if s.member == new and s.partition == partition]
            if not released or not taken:
                found.append(f"{TOPIC}-{partition} did not move from {old} to {new}")
            elif min(taken) < min(released):
                found.append(
                    f"{new} got {TOPIC}-{partition} at {min(taken)} before {old} released it "
                    f"at {min(released)}"
                )
        return found


def _joins(*names: str) -> tuple[Step, ...]:
    return tuple(step for name in names for step in (join(name), until_stable()))


CASE_STUDIES: tuple[CaseStudy, ...] = (
    CaseStudy(
        name="members_joining_one_by_one",
        summary=(
            "A, B and C join a group subscribed to foo (3 partitions) one after the other; each "
            "newcomer gets its partitions only after their owner revoked them."
        ),
        partitions=3,
        steps=_joins("A", "B", "C"),
        expected={"A": (0,), "B": (2,), "C": (1,)},
        handovers=(("A", "B", 2), ("A", "C", 1)),
    ),
    CaseStudy(
        name="incremental_revocation_six_partitions",
        summary=(
            "With 6 partitions, C joins A and B: A revokes foo-2 and B foo-5; C gets foo-2 as "
            "soon as A released it and foo-5 once B did, without waiting for the whole group."
        ),
        partitions=6,
        steps=_joins("A", "B", "C"),
        expected={"A": (0, 1), "B": (3, 4), "C": (2, 5)},
        handovers=(("A", "B", 3), ("A", "B", 4), ("A", "B", 5), ("A", "C", 2), ("B", "C", 5)),
    ),
    CaseStudy(
        name="member_failure",
        summary=(
            "A fails to heartbeat; after the session timeout the coordinator removes it and "
            "gives foo-0 to B and foo-1 to C (no revocation: A is gone)."
        ),
        partitions=6,
        steps=(*_joins("A", "B", "C"), crash("A"), until_stable()),
        expected={"B": (0, 3, 4), "C": (1, 2, 5)},
        handovers=(("A", "B", 3), ("A", "B", 4), ("A", "B", 5), ("A", "C", 2), ("B", "C", 5)),
        session_timeout_ms=45_000,
    ),
    CaseStudy(
        name="partition_added",
        summary=(
            "A owns foo-0 and B nothing; foo-1 is created, the coordinator bumps the group epoch "
            "and B gets foo-1 while A keeps foo-0."
        ),
        partitions=1,
        steps=(*_joins("A", "B"), add_partitions(TOPIC, 2), until_stable()),
        expected={"A": (0,), "B": (1,)},
    ),
)


def case_study(name: str) -> CaseStudy:
    """The case study called ``name``."""
    for case in CASE_STUDIES:
        if case.name == name:
            return case
    known = ", ".join(case.name for case in CASE_STUDIES)
    raise KeyError(f"no case study {name!r}; known: {known}")
