"""What the application sees of the background loop's member: its published state, epoch and
id, and the events that tell it they moved.

The member is touched by the loop's thread only; :class:`MemberPublisher` copies what the
application reads (``state``, ``member_id``, ``member_epoch``: each attribute replaced
atomically) and queues :class:`~consumer._bridge.messages.StateChanged` and, while someone
listens, :class:`~consumer._bridge.member_events.StateTransition` events.
"""

from __future__ import annotations

from consumer._bridge.member_events import MemberEventSwitch, TransitionReporter
from consumer._bridge.messages import StateChanged, ToAppEvent
from consumer._bridge.queues import ToApplication
from consumer._runtime.metrics import MetricsRecorder
from consumer.member import Member, MemberState
from consumer.member.effects import MemberRule

__all__ = ["MemberPublisher"]


class MemberPublisher:
    """Publishes a member's state for the application thread (see the module docstring).

    Call :meth:`row_fired` from the member's transition observer and :meth:`publish` after
    every input and every ``Member.poll``.
    """

    __slots__ = (
        "_metrics",
        "_row_fired",
        "_to_application",
        "_transitions",
        "member_epoch",
        "member_id",
        "state",
    )

    def __init__(
        self,
        member: Member,
        metrics: MetricsRecorder,
        to_application: ToApplication[ToAppEvent],
        switch: MemberEventSwitch,
    ) -> None:
        self._metrics = metrics
        self._to_application = to_application
        #: Queues a StateTransition for the application while its switch is on.
        self._transitions = TransitionReporter(switch, member.state.name)
        #: Whether a rules-table row fired since the last :meth:`publish`.
        self._row_fired = False
        self.state: MemberState = member.state
        self.member_id: str = member.member_id
        self.member_epoch: int = member.member_epoch

    def row_fired(self, member: Member, rule: MemberRule) -> None:
        """The member's observer: a rules-table row fired (``member`` is in its new state)."""
        self._row_fired = True
        self._metrics.state_changed(member.state)
        self._report_transition(member, rule.outcome.name)

    def publish(self, member: Member) -> None:
        """Copy the member's state, epoch and id for the application; queue what moved.

        When no row fired since the last call and the epoch is the one published then, nothing
        moved: the state moves only in a row, and the id is the member's for its lifetime. The
        transition reporter saw those values last (the previous call reported them), so it is
        skipped (an idle member's every turn, which reads one attribute here).
        """
        epoch = member.member_epoch
        if not self._row_fired and epoch == self.member_epoch:
            return
        state = member.state
        member_id = member.member_id
        self._row_fired = False
        self._report_transition(member, None)  # an epoch moved outside any row (an answer)
        if state is not self.state:
            previous, self.state = self.state, state
            self._to_application.put(StateChanged(previous, state))
        self.member_id = member_id
        self.member_epoch = epoch

    def _report_transition(self, member: Member, reason: str | None) -> None:
        """Queue a StateTransition if the state or the epoch moved since the last one."""
        event = self._transitions.report(
            member.state.name, member.member_epoch, member.member_id, reason
        )
        if event is not None:
            self._to_application.put(event)
