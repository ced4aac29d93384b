"""What the application thread may ask of a running background loop (besides queued events)."""

from __future__ import annotations

from typing import Protocol

from consumer.member import MemberState

__all__ = ["RuntimeHandle"]


class RuntimeHandle(Protocol):
    """The application's view of the background runtime.

    The published member attributes are replaced atomically by the loop after every step; the
    rest of the runtime is reached only through the bridge's queues and :class:`LastPoll`.
    """

    @property
    def state(self) -> MemberState:
        """The member state, as last published."""
        ...

    @property
    def member_id(self) -> str:
        """The member id, as last published."""
        ...

    @property
    def member_epoch(self) -> int:
        """The member epoch, as last published."""
        ...

    @property
    def failure(self) -> BaseException | None:
        """Why the loop died, if it did."""
        ...

    @property
    def finished(self) -> bool:
        """True once the loop has ended (cleanly or not)."""
        ...

    def metrics(self) -> dict[str, float]:
        """The member's rebalance, heartbeat and commit metrics now."""
        ...

    def start(self) -> None:
        """Start the loop's thread and wait until it accepts events."""
        ...

    def stop(self, timeout_s: float) -> None:
        """Ask the loop to stop and wait for its thread to end (at most ``timeout_s``)."""
        ...
