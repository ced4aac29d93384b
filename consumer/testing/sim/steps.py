"""Scenario steps for :meth:`GroupSim.run`: each one is a small callable applied to the group.

A scenario is a plain list, so steps compose with list operations::

    sim.run([join("a"), join("b"), until_stable(), crash("a"), until_stable()])

Every step is also a method of :class:`~consumer.testing.sim.GroupSim` with the same arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from consumer.testing.sim.group import GroupSim, Loop

__all__ = [
    "Step",
    "add_partitions",
    "commit_fails",
    "coordinator_moved",
    "crash",
    "fence",
    "join",
    "leave",
    "network_cut",
    "produce",
    "stall",
    "until_stable",
    "wait",
]


@dataclass(frozen=True)
class Step:
    """One scenario step: ``description`` for reports, ``action`` applied to the group."""

    description: str
    action: Callable[[GroupSim], object]

    def __call__(self, sim: GroupSim) -> object:
        return self.action(sim)

    def __repr__(self) -> str:
        return self.description


def join(
    name: str,
    topics: Iterable[str] | None = None,
    *,
    listener: object | None = None,
    loop: Loop | None = None,
    config: Mapping[str, Any] | None = None,
) -> Step:
    """Member ``name`` subscribes (see :meth:`GroupSim.join`)."""
    chosen = None if topics is None else list(topics)
    return Step(
        f"join({name!r})",
        lambda sim: sim.join(name, chosen, listener=listener, loop=loop, config=config),
    )


def leave(name: str) -> Step:
    """Member ``name`` closes its consumer and leaves."""
    return Step(f"leave({name!r})", lambda sim: sim.leave(name))


def crash(name: str) -> Step:
    """Member ``name`` dies at once."""
    return Step(f"crash({name!r})", lambda sim: sim.crash(name))


def stall(name: str, poll_ms: int) -> Step:
    """Member ``name`` stops polling for ``poll_ms`` (the group runs on meanwhile)."""
    return Step(f"stall({name!r}, {poll_ms})", lambda sim: sim.stall(name, poll_ms))


def fence(name: str) -> Step:
    """The coordinator fences member ``name``."""
    return Step(f"fence({name!r})", lambda sim: sim.fence(name))


def coordinator_moved() -> Step:
    """The group coordinator moves to another broker."""
    return Step("coordinator_moved()", lambda sim: sim.coordinator_moved())


def add_partitions(topic: str, partitions: int) -> Step:
    """Grow ``topic`` to ``partitions`` partitions."""
    return Step(
        f"add_partitions({topic!r}, {partitions})",
        lambda sim: sim.add_partitions(topic, partitions),
    )


def network_cut(name: str, ms: int) -> Step:
    """Member ``name``'s requests fail for ``ms`` (the group runs on meanwhile)."""
    return Step(f"network_cut({name!r}, {ms})", lambda sim: sim.network_cut(name, ms))


def commit_fails(name: str, error: int | str, times: int = 1) -> Step:
    """Member ``name``'s next ``times`` commits fail with ``error``."""
    return Step(
        f"commit_fails({name!r}, {error!r}, {times})",
        lambda sim: sim.commit_fails(name, error, times),
    )


def wait(ms: int) -> Step:
    """Run the group for ``ms``."""
    return Step(f"wait({ms})", lambda sim: sim.wait(ms))


def until_stable(max_ms: int = 300_000) -> Step:
    """Run until the group is stable (fails the run after ``max_ms``)."""
    return Step(f"until_stable({max_ms})", lambda sim: sim.until_stable(max_ms))


def produce(topic: str, value: bytes | str | None, count: int = 1, **kwargs: Any) -> Step:
    """Produce ``count`` records of ``value`` (keyword arguments as
    :meth:`SimCluster.produce`)."""

    def action(sim: GroupSim) -> None:
        for _ in range(count):
            sim.produce(topic, value, **kwargs)

    return Step(f"produce({topic!r}, {value!r}, count={count})", action)
