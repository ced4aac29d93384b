"""The rules-table engine shared by every member kind (consumer group, share group).

A member kind declares, as data, its states, the *outcomes* its managers report (small named
values such as "target received" or "fenced"), optional *guards* (named conditions) and *effects*
(named actions), and one table of :class:`Rule` rows: "in one of these states, on this outcome,
when this guard holds, go to that state and run these effects". The engine only looks rows up
and moves the state; the member object runs the effects. Nothing here knows Kafka.

Why not the ``transitions`` library: the member used a ``transitions.Machine`` with no callbacks
and no conditions, as a dictionary lookup. Here the effects must *return* commands (the core is
sans-I/O and effects are not fire-and-forget callbacks), guards are read from one place, and the
documentation is generated from the rows themselves; a lookup over frozen rows does all of that
in a few lines, where ``transitions`` would add indirection (callbacks resolved by name on a model
object) without removing any of it.

Round phases of a reconciliation are a second, smaller shape: a fixed sequence of steps in which
steps with nothing to do are skipped (:class:`StepCursor`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar


class KeyEnum(enum.Enum):
    """An enum whose members are table keys (states, outcomes, effects, guards, phases).

    ``enum.Enum`` hashes a member by its name in a Python-level ``__hash__``. Members are
    singletons compared by identity, so hashing by identity is the same equality, done in C:
    the member looks its states, outcomes and effects up in dicts and sets on every turn (an
    idle member's heartbeat made about eight of those calls).
    """

    __hash__ = object.__hash__


StateT = TypeVar("StateT", bound=enum.Enum)
OutcomeT = TypeVar("OutcomeT", bound=enum.Enum)
EffectT = TypeVar("EffectT", bound=enum.Enum)
GuardT = TypeVar("GuardT", bound=enum.Enum)
StepT = TypeVar("StepT", bound=enum.Enum)


@dataclass(frozen=True, slots=True)
class Rule(Generic[StateT, OutcomeT, EffectT, GuardT]):
    """One row: in any of ``sources``, on ``outcome``, if ``guard`` holds (or is None), move to
    ``dest`` (None: stay) and run ``effects`` in order. ``when`` says it in words for the docs."""

    sources: tuple[StateT, ...]
    outcome: OutcomeT
    dest: StateT | None
    effects: tuple[EffectT, ...] = ()
    guard: GuardT | None = None
    when: str = ""

    @property
    def key(self) -> str:
        """A stable name of the row (used by tests and the generated docs)."""
        sources = "|".join(state.name for state in self.sources)
        guard = "" if self.guard is None else f"[{self.guard.name}]"
        return f"{sources}:{self.outcome.name}{guard}"

    def target(self, source: StateT) -> StateT:
        """The state this row leads to from ``source``."""
        return source if self.dest is None else self.dest


class RulesTable(Generic[StateT, OutcomeT, EffectT, GuardT]):
    """Rows indexed by (state, outcome); the first row whose guard holds wins.

    Raises:
        ValueError: a row without guard shadows a later row for the same (state, outcome), or
            two rows are identical: the table would be ambiguous.
    """

    def __init__(self, rows: Iterable[Rule[StateT, OutcomeT, EffectT, GuardT]]) -> None:
        self.rows: tuple[Rule[StateT, OutcomeT, EffectT, GuardT], ...] = tuple(rows)
        index: dict[tuple[StateT, OutcomeT], list[Rule[StateT, OutcomeT, EffectT, GuardT]]] = {}
        for row in self.rows:
            for source in row.sources:
                candidates = index.setdefault((source, row.outcome), [])
                if candidates and candidates[-1].guard is None:
                    raise ValueError(f"row {row.key} is shadowed by {candidates[-1].key}")
                candidates.append(row)
        self._index = {key: tuple(value) for key, value in index.items()}

    def decide(
        self, state: StateT, outcome: OutcomeT, holds: Callable[[GuardT], bool]
    ) -> Rule[StateT, OutcomeT, EffectT, GuardT] | None:
        """The row that applies, or None: an outcome without a row changes nothing."""
        for row in self._index.get((state, outcome), ()):
            if row.guard is None or holds(row.guard):
                return row
        return None

    def outcomes_from(self, state: StateT) -> frozenset[OutcomeT]:
        """Outcomes that have at least one row in ``state``."""
        return frozenset(outcome for (source, outcome) in self._index if source is state)

    def destinations(self, state: StateT) -> frozenset[StateT]:
        """States one row can lead to from ``state`` (itself included for staying rows)."""
        return frozenset(
            row.target(state)
            for (source, _), rows in self._index.items()
            if source is state
            for row in rows
        )


class StateCell(Generic[StateT, OutcomeT, EffectT, GuardT]):
    """Holds a member's state; the only code that assigns it.

    ``observer`` (optional) is told every row that fires, with the state it left: the hook for
    timelines, metrics and the test that proves each row is exercised.
    """

    def __init__(
        self,
        initial: StateT,
        observer: Callable[[StateT, Rule[StateT, OutcomeT, EffectT, GuardT]], None] | None = None,
    ) -> None:
        self._state = initial
        self._observer = observer

    @property
    def state(self) -> StateT:
        """The current state."""
        return self._state

    def enter(self, rule: Rule[StateT, OutcomeT, EffectT, GuardT]) -> None:
        """Follow ``rule`` from the current state (which must be one of its sources)."""
        source = self._state
        if source not in rule.sources:
            raise ValueError(f"row {rule.key} does not apply in {source.name}")
        self._state = rule.target(source)
        if self._observer is not None:
            self._observer(source, rule)


class StepCursor(Generic[StepT]):
    """Walks a fixed sequence of steps, skipping those with nothing to do.

    ``current`` is None before the first :meth:`advance` and after the last step (done).
    """

    def __init__(self, steps: tuple[StepT, ...]) -> None:
        self._steps = steps
        self._index = -1
        self.current: StepT | None = None

    def advance(self, skip: Callable[[StepT], bool]) -> StepT | None:
        """Move to the next step for which ``skip`` is false; None when none is left."""
        self._index += 1
        while self._index < len(self._steps) and skip(self._steps[self._index]):
            self._index += 1
        self.current = self._steps[self._index] if self._index < len(self._steps) else None
        return self.current


def rows_by_source(
    rows: Iterable[Rule[StateT, OutcomeT, EffectT, GuardT]],
) -> Mapping[StateT, tuple[Rule[StateT, OutcomeT, EffectT, GuardT], ...]]:
    """Rows grouped under each of their source states, in table order (for docs)."""
    grouped: dict[StateT, list[Rule[StateT, OutcomeT, EffectT, GuardT]]] = {}
    for row in rows:
        for source in row.sources:
            grouped.setdefault(source, []).append(row)
    return {state: tuple(found) for state, found in grouped.items()}
