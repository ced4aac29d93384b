"""What :meth:`consumer.Consumer.add_member_listener` delivers: the member's state transitions,
epoch changes and rebalance callbacks, as values (re-exported by :mod:`consumer`).

The background loop stamps and queues :class:`StateTransition` events (only while a listener is
registered: :class:`MemberEventSwitch`); the application thread creates :class:`RebalanceEvent`
events around the rebalance callbacks. Both reach listeners on the thread that calls ``poll()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MemberEvent",
    "MemberEventSwitch",
    "MemberListener",
    "RebalanceEvent",
    "RebalanceKind",
    "StateTransition",
    "TransitionReporter",
    "wall_clock_ms",
]

RebalanceKind = Literal["assigned", "revoked", "lost"]


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch (comparable between processes of one machine)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class StateTransition:
    """The member moved from state ``previous`` to ``current``, or its epoch moved.

    Attributes:
        previous: the state left (a :class:`~consumer.member.MemberState` name).
        current: the state entered; equal to ``previous`` when only the epoch changed.
        member_id: the member id (client-generated, KIP-1082).
        previous_epoch: the member epoch before.
        member_epoch: the member epoch now (0: not in the group).
        reason: the outcome of the rules-table row that fired (for example
            ``TARGET_RECEIVED`` or ``FENCED``), or ``None`` when only the epoch moved.
        at_ms: when it happened, in milliseconds since the Unix epoch.
    """

    previous: str
    current: str
    member_id: str
    previous_epoch: int
    member_epoch: int
    reason: str | None
    at_ms: int

    def __str__(self) -> str:
        epoch = (
            f"epoch {self.member_epoch}"
            if self.member_epoch == self.previous_epoch
            else f"epoch {self.previous_epoch} -> {self.member_epoch}"
        )
        why = "" if self.reason is None else f" on {self.reason}"
        return f"{self.member_id} {self.previous} -> {self.current}{why} ({epoch})"


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    """A rebalance callback moment: ``partitions`` were ``assigned``, ``revoked`` or ``lost``.

    ``assigned`` is delivered just before ``on_assign`` runs; ``revoked`` and ``lost`` just after
    ``on_revoke`` / ``on_lost`` returned (before the member reports the revocation complete), so
    the interval between them covers every callback. Delivered whether or not the application
    passed that callback to ``subscribe()``.

    Attributes:
        kind: ``assigned``, ``revoked`` or ``lost``.
        partitions: ``(topic, partition)`` pairs, sorted.
        member_id: the member id.
        member_epoch: the member epoch as last published by the background loop.
        at_ms: when it happened, in milliseconds since the Unix epoch.
    """

    kind: RebalanceKind
    partitions: tuple[tuple[str, int], ...]
    member_id: str
    member_epoch: int
    at_ms: int

    def __str__(self) -> str:
        listed = ", ".join(f"{topic}[{partition}]" for topic, partition in self.partitions)
        return f"{self.member_id} {self.kind} {listed or 'nothing'} (epoch {self.member_epoch})"


MemberEvent = StateTransition | RebalanceEvent
#: A listener of :meth:`consumer.Consumer.add_member_listener`; its return value is ignored.
MemberListener = Callable[[MemberEvent], object]


class MemberEventSwitch:
    """Whether anyone listens: set by the application thread, read by the background loop, so
    the loop queues no :class:`StateTransition` while nobody does (one ``bool``, no lock)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


class TransitionReporter:
    """Turns the member's (state, epoch) moves into :class:`StateTransition` events.

    A runtime calls :meth:`report` after every rules-table row (with the row's outcome as the
    reason) and after every input (reason ``None``: an epoch that moved outside any row); it gets
    an event to queue, or ``None`` when nothing moved or nobody listens (``switch.on`` is off).
    ``clock_ms`` stamps the events (the wall clock, or a simulation's clock).
    """

    __slots__ = ("_clock_ms", "_reported", "switch")

    def __init__(
        self,
        switch: MemberEventSwitch,
        initial_state: str,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.switch = switch
        self._clock_ms = clock_ms
        self._reported: tuple[str, int] = (initial_state, 0)

    def report(
        self, state: str, member_epoch: int, member_id: str, reason: str | None
    ) -> StateTransition | None:
        """The event for a move since the last call, if anyone listens."""
        now = (state, member_epoch)
        before = self._reported
        if now == before:
            return None
        self._reported = now
        if not self.switch.on:
            return None
        return StateTransition(
            previous=before[0],
            current=state,
            member_id=member_id,
            previous_epoch=before[1],
            member_epoch=member_epoch,
            reason=reason,
            at_ms=self._clock_ms(),
        )
