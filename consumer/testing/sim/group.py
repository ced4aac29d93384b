"""``GroupSim``: run the application's own listeners in a simulated consumer group.

N members share one :class:`~consumer.testing.sim.SimCluster`; each is a
:class:`~consumer.testing.sim.FakeConsumer` subscribed with the application's ``on_assign`` /
``on_revoke`` / ``on_lost`` (and ``on_commit`` through the configuration), and driven by the
application's own poll-loop function, called once per member per simulated step (``tick_ms``).
Time belongs to the group: a member's ``poll()`` serves what is ready at the current instant, and
the clock moves between steps. Members take their turn in a seed-determined order.

Drive it imperatively (``sim.join("a")``, ``sim.wait(10_000)``) or with a list of steps from
:mod:`consumer.testing.sim.steps` (``sim.run([join("a"), join("b"), until_stable()])``). After a
run, :meth:`GroupSim.result` gives the ownership timeline (the same
:class:`~consumer.testing.timeline.Timeline` schema as real runs), every callback with its
arguments and simulated time, and the invariant checker's verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from consumer.member import MemberState
from consumer.testing.invariants import CheckReport
from consumer.testing.sim.cluster import CallbackCall, SimCluster
from consumer.testing.sim.fake_consumer import FakeConsumer
from consumer.testing.sim.topics import SimRecord
from consumer.testing.sim.verdict import verdict
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import EVENT_NAMES, FENCE, KILL

__all__ = ["GroupSim", "Loop", "SimResult", "SimulationError"]

#: An application's poll loop body: called once per simulated step with the member's consumer.
Loop = Callable[[FakeConsumer], None]
_CALLBACKS = ("on_assign", "on_revoke", "on_lost")
#: Records the default loop takes per step at most (a bound, so one member cannot starve time).
_DEFAULT_LOOP_BATCH = 500


class SimulationError(RuntimeError):
    """A scenario could not run as written (unknown member, never stable, ...)."""


def default_loop(consumer: FakeConsumer) -> None:
    """Poll until nothing is ready (at most 500 records a step); records count as processed."""
    for _ in range(_DEFAULT_LOOP_BATCH):
        if consumer.poll(0) is None:
            return


@dataclass
class _Member:
    consumer: FakeConsumer
    loop: Loop
    listener: object | None
    stalled_until_ms: int = -1
    gone: bool = False


@dataclass
class SimResult:
    """What a run did: its timeline, callbacks and verdict."""

    seed: int
    timeline: Timeline
    callbacks: list[CallbackCall]
    report: CheckReport
    assignments: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No invariant was broken."""
        return self.report.ok

    def timeline_jsonl(self) -> str:
        """The timeline as JSON lines (byte-identical for the same seed and scenario)."""
        return "".join(
            json.dumps({"type": EVENT_NAMES[type(event)], **asdict(event)}) + "\n"
            for event in self.timeline.events()
        )

    def calls(self, member: str | None = None, callback: str | None = None) -> list[CallbackCall]:
        """The callbacks run, optionally only ``member``'s and only of one kind."""
        return [
            call
            for call in self.callbacks
            if (member is None or call.member == member)
            and (callback is None or call.callback == callback)
        ]


class GroupSim:
    """A consumer group of simulated members running the application's code.

    Args:
        topics: topics to create, name -> partition count; members subscribe to all of them
            unless :meth:`join` names others.
        seed: drives every random choice (same seed and scenario: same timeline, byte for byte).
        listener: makes each member's listener object; its ``on_assign`` / ``on_revoke`` /
            ``on_lost`` / ``on_commit`` attributes (those it has) are the member's callbacks, and
            its ``loop(consumer)`` method, if any, the member's poll-loop body.
        loop: the application's poll-loop body for members whose listener has none (default:
            poll until nothing is ready).
        config: consumer configuration for every member (``group.id`` defaults to ``group``,
            ``auto.offset.reset`` to ``earliest``).
        tick_ms: simulated time between two rounds of loop calls.
        session_timeout_ms, heartbeat_interval_ms: the coordinator's settings.
    """

    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        *,
        seed: int = 0,
        listener: Callable[[], object] | None = None,
        loop: Loop | None = None,
        config: Mapping[str, Any] | None = None,
        tick_ms: int = 100,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 5_000,
    ) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms must be at least 1, got {tick_ms}")
        self.cluster = SimCluster(
            seed,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )
        self.cluster.poll_advances_clock = False
        self.seed = seed
        self.tick_ms = tick_ms
        self.config: dict[str, Any] = {
            "group.id": "group",
            "auto.offset.reset": "earliest",
            **(config or {}),
        }
        self.listener = listener
        self.loop = loop or default_loop
        self.members: dict[str, _Member] = {}
        for name, partitions in (topics or {}).items():
            self.cluster.create_topic(name, partitions)

    @property
    def now_ms(self) -> int:
        """The simulated time."""
        return self.cluster.clock.now_ms

    def consumer(self, name: str) -> FakeConsumer:
        """Member ``name``'s consumer."""
        return self._member(name).consumer

    # --- membership -------------------------------------------------------------------------

    def join(
        self,
        name: str,
        topics: Iterable[str] | None = None,
        *,
        listener: object | None = None,
        loop: Loop | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> FakeConsumer:
        """Start member ``name``: subscribe it with its listener's callbacks; it polls from the
        next step on."""
        if name in self.members and not self.members[name].gone:
            raise SimulationError(f"member {name!r} is already in the group")
        if listener is None and self.listener is not None:
            listener = self.listener()
        settings = {**self.config, **(config or {})}
        on_commit = getattr(listener, "on_commit", None)
        if on_commit is not None:
            settings.setdefault("on_commit", on_commit)
        suffix = sum(1 for n in self.cluster.consumers() if n.split("#")[0] == name)
        label = name if suffix == 0 else f"{name}#{suffix + 1}"
        fake = self.cluster.consumer(settings, name=label)
        callbacks = {kind: getattr(listener, kind, None) for kind in _CALLBACKS}
        fake.subscribe(list(topics) if topics is not None else sorted(self.cluster.topics.logs),
                       **callbacks)  # fmt: skip
        listener_loop = getattr(listener, "loop", None)
        chosen_loop = loop or (listener_loop if callable(listener_loop) else None) or self.loop
        self.members[name] = _Member(fake, chosen_loop, listener)
        return fake

    def leave(self, name: str) -> None:
        """Member ``name`` closes its consumer: commit, ``on_revoke``, leave the group."""
        member = self._member(name)
        member.consumer.close()
        member.gone = True

    def crash(self, name: str) -> None:
        """Member ``name`` dies at once (no commit, no callback, no leave heartbeat)."""
        member = self._member(name)
        member.consumer.crash()
        member.gone = True
        self.cluster.timeline.fault(KILL, member.consumer.name, self.now_ms, self.now_ms)

    def fence(self, name: str) -> None:
        """The coordinator fences member ``name``: it is removed from the group now, and its
        next heartbeat is answered FENCED_MEMBER_EPOCH (``on_lost``, then it rejoins)."""
        fake = self._member(name).consumer
        runtime = fake.runtime
        if runtime is None:  # pragma: no cover - join() always subscribes
            raise SimulationError(f"member {name!r} has no membership to fence")
        group = self.cluster.group(self.config["group.id"])
        if runtime.member_id in group.members:
            group.members.pop(runtime.member_id)
            group.target.pop(runtime.member_id, None)
            group.group_epoch += 1
        runtime.faults.fenced = True
        self.cluster.timeline.fault(FENCE, fake.name, self.now_ms, self.now_ms)

    def stall(self, name: str, poll_ms: int) -> None:
        """Member ``name``'s application stops polling for ``poll_ms`` while the group runs on
        (past ``max.poll.interval.ms`` the member leaves as STALE and ``on_lost`` follows)."""
        member = self._member(name)
        start = self.now_ms
        member.stalled_until_ms = start + poll_ms
        # Not an isolating fault: the member's heartbeats go on while its application stalls.
        self.cluster.timeline.fault("stall", member.consumer.name, start, start + poll_ms)
        self.wait(poll_ms)

    def network_cut(self, name: str, ms: int) -> None:
        """Member ``name``'s requests fail for ``ms`` while the group runs on."""
        fake = self._member(name).consumer
        if fake.runtime is not None:
            fake.runtime.faults.cut_until_ms = self.now_ms + ms
        self.cluster.timeline.fault("partition", fake.name, self.now_ms, self.now_ms + ms)
        self.wait(ms)

    def commit_fails(self, name: str, error: int | str, times: int = 1) -> None:
        """Member ``name``'s next ``times`` commit requests fail with ``error`` (a Kafka error
        code or its name, for example ``"STALE_MEMBER_EPOCH"``)."""
        code = _error_code(error)
        fake = self._member(name).consumer
        if fake.runtime is not None:
            fake.runtime.faults.commit_errors.extend([code] * times)
        self.cluster.timeline.fault("commit_error", fake.name, self.now_ms, self.now_ms)

    def coordinator_moved(self) -> None:
        """The group coordinator moves to another broker (members get NOT_COORDINATOR)."""
        self.cluster.move_coordinator()
        self.cluster.timeline.fault("coordinator_moved", None, self.now_ms, self.now_ms)

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Grow ``topic`` to ``partitions`` partitions."""
        self.cluster.add_partitions(topic, partitions)

    def produce(self, topic: str, value: bytes | str | None, **kwargs: Any) -> SimRecord:
        """Produce one record (see :meth:`SimCluster.produce`)."""
        return self.cluster.produce(topic, value, **kwargs)

    # --- time -------------------------------------------------------------------------------

    def step(self) -> None:
        """One round: every live, polling member runs its loop once; then ``tick_ms`` pass."""
        names = sorted(self.members)
        self.cluster.rng.shuffle(names)
        for name in names:
            member = self.members[name]
            if member.gone or member.consumer.closed or self.now_ms < member.stalled_until_ms:
                continue
            member.loop(member.consumer)
        self.cluster.advance(self.tick_ms)

    def wait(self, ms: int) -> None:
        """Run the group for ``ms`` of simulated time."""
        end = self.now_ms + ms
        while self.now_ms < end:
            self.step()

    def until_stable(self, max_ms: int = 300_000) -> int:
        """Run until every live member is STABLE and owns its target; returns the time taken.

        Raises :class:`SimulationError` when the group is not stable within ``max_ms``.
        """
        start = self.now_ms
        while not self.stable():
            if self.now_ms - start >= max_ms:
                states = {n: m.consumer.state for n, m in self.members.items() if not m.gone}
                raise SimulationError(f"the group was not stable within {max_ms} ms: {states}")
            self.step()
        return self.now_ms - start

    def stable(self) -> bool:
        """Every live member is STABLE at the target epoch, its application owns its target, and
        the coordinator knows no other member."""
        group = self.cluster.group(self.config["group.id"])
        if group.target_epoch != group.group_epoch:
            return False
        live_ids = {
            m.consumer.runtime.member_id
            for m in self.members.values()
            if not m.gone and m.consumer.runtime is not None
        }
        if set(group.members) != live_ids:
            return False  # a dead member still holds partitions until its session expires
        for member in self.members.values():
            if member.gone:
                continue
            fake = member.consumer
            runtime = fake.runtime
            if runtime is None or runtime.state is not MemberState.STABLE:
                return False
            server = group.members.get(runtime.member_id)
            if server is None or server.epoch != group.target_epoch:
                return False
            target = {(tp.topic, tp.partition) for tp in group.target_assignment(server.member_id)}
            if {(tp.topic, tp.partition) for tp in fake.assignment()} != target:
                return False
        return True

    # --- scenarios and results --------------------------------------------------------------

    def run(self, steps: Iterable[Callable[[GroupSim], object]]) -> SimResult:
        """Apply each step in order (see :mod:`consumer.testing.sim.steps`); returns the result."""
        for step in steps:
            step(self)
        return self.result()

    def result(self) -> SimResult:
        """The run so far: timeline, callbacks, final assignments and states, verdict."""
        live = {n: m.consumer for n, m in self.members.items() if not m.gone}
        return SimResult(
            seed=self.seed,
            timeline=self.cluster.timeline,
            callbacks=list(self.cluster.callbacks),
            report=verdict(self.cluster.timeline, self.cluster.session_timeout_ms),
            assignments={
                n: [(tp.topic, tp.partition) for tp in c.assignment()] for n, c in live.items()
            },
            states={n: c.state for n, c in live.items()},
        )

    def _member(self, name: str) -> _Member:
        member = self.members.get(name)
        if member is None or member.gone:
            known = ", ".join(n for n, m in sorted(self.members.items()) if not m.gone) or "none"
            raise SimulationError(f"no live member named {name!r}; live members: {known}")
        return member


def _error_code(error: int | str) -> int:
    if isinstance(error, int):
        return error
    try:
        return int(ErrorCode[error.lower()])
    except KeyError:
        raise SimulationError(
            f"unknown Kafka error {error!r}: give a code or a name such as 'STALE_MEMBER_EPOCH'"
        ) from None
