"""A single-share-member rig for the share core's unit tests (imported as a plain module).

It also holds the record of the rules-table rows fired in this session (``FIRED``), filled by
``conftest.py`` and read by ``test_share_rules_coverage.py``.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, TypeVar

from consumer.member.inputs import CoordinatorChanged
from consumer.member.partitions import Assignment, TopicIdPartition
from consumer.share import (
    ApplyShareAssignment,
    SendShareHeartbeat,
    ShareAssignmentApplied,
    ShareCommand,
    ShareHeartbeatFailed,
    ShareHeartbeatSucceeded,
    ShareInput,
    ShareMember,
    ShareMemberConfig,
    ShareState,
    StopAndFlush,
    StoppedAndFlushed,
    Subscribed,
)

#: Keys of the share rows fired so far in this session, and the share tests that ran.
FIRED: set[str] = set()
RAN: list[str] = []

FOO = uuid.UUID("00000000-0000-0000-0000-00000000f001")
BAR = uuid.UUID("00000000-0000-0000-0000-00000000ba42")

C = TypeVar("C")


def tp(topic_id: uuid.UUID, partition: int) -> TopicIdPartition:
    return TopicIdPartition(topic_id, partition)


def parts(topic_id: uuid.UUID, *partitions: int) -> Assignment:
    return frozenset(TopicIdPartition(topic_id, p) for p in partitions)


class ShareRig:
    """Drives one ShareMember by hand and remembers every command it emitted."""

    def __init__(self, seed: int = 7, **overrides: Any) -> None:
        settings: dict[str, Any] = {"group_id": "sg", "retry_backoff_jitter": 0.0}
        settings.update(overrides)
        self.config = ShareMemberConfig(**settings)
        self.member = ShareMember(self.config, random.Random(seed))
        self.now = 0
        self.commands: list[ShareCommand] = []

    # --- driving ----------------------------------------------------------------------------

    def handle(self, event: ShareInput) -> list[ShareCommand]:
        out = self.member.handle(event, self.now)
        self.commands += out
        return out

    def poll(self) -> list[ShareCommand]:
        out, _ = self.member.poll(self.now)
        self.commands += out
        return out

    def deadline(self) -> int | None:
        return self.member.poll(self.now)[1]

    def advance(self, delta_ms: int) -> None:
        self.now += delta_ms

    @property
    def state(self) -> ShareState:
        return self.member.state

    def last(self, kind: type[C]) -> C:
        for command in reversed(self.commands):
            if isinstance(command, kind):
                return command
        raise AssertionError(f"no {kind.__name__} among {self.commands}")

    def of(self, kind: type[C], commands: list[ShareCommand] | None = None) -> list[C]:
        return [c for c in (self.commands if commands is None else commands) if isinstance(c, kind)]

    # --- the usual exchanges ----------------------------------------------------------------

    def heartbeat(self) -> SendShareHeartbeat:
        """Poll and return the heartbeat that went out (fails if none did)."""
        sent = self.of(SendShareHeartbeat, self.poll())
        assert sent, f"no heartbeat sent in {self.state.name}"
        return sent[-1]

    def answer(
        self,
        sent: SendShareHeartbeat,
        epoch: int,
        assignment: Assignment | None = None,
        interval_ms: int = 1_000,
    ) -> list[ShareCommand]:
        return self.handle(ShareHeartbeatSucceeded(sent.request_id, epoch, interval_ms, assignment))

    def fail(
        self, sent: SendShareHeartbeat, code: int, message: str | None = None
    ) -> list[ShareCommand]:
        return self.handle(ShareHeartbeatFailed(sent.request_id, code, message))

    def flushed(self) -> list[ShareCommand]:
        return self.handle(StoppedAndFlushed(self.last(StopAndFlush).request_id))

    def applied(self) -> list[ShareCommand]:
        return self.handle(ShareAssignmentApplied(self.last(ApplyShareAssignment).request_id))

    def join(
        self, assignment: Assignment = frozenset(), topics: tuple[str, ...] = ("foo",)
    ) -> None:
        """Subscribe, find the coordinator, join at epoch 1 and apply ``assignment``; then the
        acknowledging heartbeat goes out (the member ends STABLE)."""
        self.handle(Subscribed(topics))
        self.poll()
        self.handle(CoordinatorChanged(1))
        self.answer(self.heartbeat(), 1, assignment)
        if assignment:
            assert self.state is ShareState.RECONCILING
            self.applied()
            assert self.state is ShareState.ACKNOWLEDGING
            self.answer(self.heartbeat(), 1)
        assert self.state is ShareState.STABLE
