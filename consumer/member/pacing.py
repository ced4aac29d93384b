"""Heartbeat pacing and coordinator discovery, shared by every member kind.

:class:`HeartbeatPacer` knows *when* a heartbeat may go out, never *what* it carries (each member
kind builds its own request). The rules (Java ``AbstractHeartbeatRequestManager``):

* nothing is sent while the coordinator is unknown (a lookup is asked for once per loss, after the
  lookup backoff);
* a state that heartbeats "at once" sends when nothing is in flight and the error backoff allows,
  as does an expedited heartbeat;
* other heartbeating states send when the interval elapsed since the latest heartbeat was *sent*
  (as librdkafka counts it; a value <= 0 is ignored), the error backoff elapsed and nothing is in
  flight: one non-leave heartbeat at a time. A response that states a new interval re-counts it
  from that send too, not from the response: the first answer to a join is written to the
  coordinator's log before it is sent (tens to hundreds of ms), and counting from it would delay
  every joiner's second heartbeat, the one that usually brings its partitions, by that much;
* a leave heartbeat is tracked apart: its answer is consumed and ignored;
* after an error the interval timer is cleared, so only the backoff gates the retry; fencing and
  coordinator moves reset the backoff. Every failure or coordinator change calls
  :meth:`HeartbeatPacer.forget_sent`, so the next heartbeat is a full request.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Protocol

from consumer.member.commands import FindCoordinator
from consumer.member.states import Heartbeats, StateInfo


class PacingSettings(Protocol):
    """The settings pacing reads (any member kind's config has them)."""

    @property
    def group_id(self) -> str:
        """The group."""

    @property
    def retry_backoff_ms(self) -> int:
        """First backoff after a failure."""

    @property
    def retry_backoff_max_ms(self) -> int:
        """Backoff cap."""

    @property
    def retry_backoff_jitter(self) -> float:
        """Relative jitter of the backoff."""

    @property
    def default_heartbeat_interval_ms(self) -> int:
        """Interval until the broker states one."""


def generate_member_id(rng: random.Random) -> str:
    """A Java-style member id: 16 random bytes as URL-safe base64 without padding (22 chars).

    Ids that are all zero bytes or start with ``-`` are re-drawn. Pass ``random.SystemRandom()`` in
    production (ids must be unique across processes); tests pass a seeded ``random.Random``.
    """
    while True:
        raw = rng.randbytes(16)
        if raw == bytes(16):
            continue
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def earliest_ms(*deadlines_ms: int | None) -> int | None:
    """The earliest of ``deadlines_ms`` (None: no deadline; None if none has one)."""
    due = None
    for deadline_ms in deadlines_ms:
        if deadline_ms is not None and (due is None or deadline_ms < due):
            due = deadline_ms
    return due


class ExponentialBackoff:
    """``base_ms * 2**(attempts-1)`` capped at ``max_ms``, times a jitter factor in [1-j, 1+j]."""

    def __init__(self, base_ms: int, max_ms: int, jitter: float, rng: random.Random) -> None:
        self._base_ms = base_ms
        self._max_ms = max_ms
        self._jitter = jitter
        self._rng = rng

    def delay_ms(self, attempts: int) -> int:
        """Backoff after ``attempts`` consecutive failures (``attempts >= 1``)."""
        exponent = min(max(attempts, 1) - 1, 30)
        term = min(self._max_ms, self._base_ms * (2**exponent))
        factor = self._rng.uniform(1.0 - self._jitter, 1.0 + self._jitter) if self._jitter else 1.0
        return max(0, int(term * factor))


class HeartbeatPacer:
    """When heartbeats and coordinator lookups may go out; the member id of the member's life."""

    def __init__(
        self, settings: PacingSettings, rng: random.Random, next_id: Callable[[], int]
    ) -> None:
        self._group_id = settings.group_id
        self._next_id = next_id
        self.member_id: str = generate_member_id(rng)
        self._backoff = ExponentialBackoff(
            settings.retry_backoff_ms,
            settings.retry_backoff_max_ms,
            settings.retry_backoff_jitter,
            rng,
        )
        self.coordinator_known = False
        self._coordinator_requested = False
        self._in_flight: int | None = None
        self._leave_request_ids: set[int] = set()
        self.interval_ms = settings.default_heartbeat_interval_ms
        self._next_interval_send_ms = 0
        self._last_sent_ms = 0
        self._backoff_until_ms = 0
        self._lookup_not_before_ms = 0
        #: A silent state's lookup failed: the next one waits for a join (LOOK_UP_AT_JOIN).
        self._lookup_postponed = False
        #: The lookup in flight was asked for in a state without heartbeats (ahead of a join).
        self.lookup_made_silently = False
        self._failed_attempts = 0
        self._expedited = False

    def forget_sent(self) -> None:
        """Forget what the coordinator was last told (a member kind's builder overrides this)."""

    # --- coordinator ------------------------------------------------------------------------

    def should_request_coordinator(self, now_ms: int, *, silently: bool = False) -> bool:
        """True once per loss of the coordinator (after any backoff): emit FindCoordinator.

        ``silently``: asked for in a state without heartbeats (see ``lookup_made_silently``)."""
        due_ms = self.coordinator_lookup_due_ms()
        if due_ms is None or now_ms < due_ms:
            return False
        self._coordinator_requested = True
        self.lookup_made_silently = silently
        return True

    def coordinator_lookup_due_ms(self) -> int | None:
        """When the next coordinator lookup may be asked for; None if none is pending."""
        if self.coordinator_known or self._coordinator_requested or self._lookup_postponed:
            return None
        return self._lookup_not_before_ms

    def postpone_lookup(self) -> None:
        """Look the coordinator up again only at :meth:`look_up_without_backoff` (a join)."""
        self._lookup_postponed = True

    def look_up_without_backoff(self, now_ms: int) -> None:
        """The member starts heartbeating: a pending lookup goes out now, not after the backoff
        of failures while it was silent (a join looks the coordinator up at once, as before)."""
        self._lookup_postponed = False
        self._lookup_not_before_ms = min(self._lookup_not_before_ms, now_ms)

    def on_lookup_failed(self, now_ms: int) -> None:
        """A coordinator lookup failed: the next one waits for the (growing) backoff."""
        self.on_failure(now_ms, reset_backoff=False)
        self._lookup_not_before_ms = self._backoff_until_ms

    @property
    def failed_attempts(self) -> int:
        """Consecutive failures (heartbeats or coordinator lookups) since the last success."""
        return self._failed_attempts

    def on_coordinator_changed(self) -> None:
        """A coordinator is known: forget in-flight requests, send a full request next."""
        self.coordinator_known = True
        self._coordinator_requested = False
        self._lookup_not_before_ms = 0
        self._lookup_postponed = False
        self.lookup_made_silently = False
        self._forget_in_flight()

    def on_coordinator_lost(self) -> None:
        """The coordinator must be looked up again; in-flight answers will be ignored."""
        self.coordinator_known = False
        self._coordinator_requested = False
        self._forget_in_flight()

    def _forget_in_flight(self) -> None:
        self._in_flight = None
        self._leave_request_ids.clear()
        self.forget_sent()

    # --- scheduling -------------------------------------------------------------------------

    @property
    def in_flight(self) -> bool:
        """True while a non-leave heartbeat awaits its answer."""
        return self._in_flight is not None

    def expedite(self) -> None:
        """Send the next heartbeat without waiting for the interval (backoff still applies)."""
        self._expedited = True

    def due(self, now_ms: int, info: StateInfo) -> tuple[list[FindCoordinator], bool]:
        """The coordinator lookup to ask for now, and whether a heartbeat is due now, in a state
        described by ``info``."""
        if not finds_coordinator(info):
            return [], False
        lookups: list[FindCoordinator] = []
        if self.should_request_coordinator(now_ms, silently=info.heartbeats is Heartbeats.NONE):
            lookups.append(FindCoordinator(self._group_id))
        due_ms = self.next_due_ms(info)
        return lookups, due_ms is not None and now_ms >= due_ms

    def next_due_ms(self, info: StateInfo) -> int | None:
        """When the next non-leave heartbeat is due, or None if none is planned."""
        if info.heartbeats is Heartbeats.NONE:
            return None
        if not self.coordinator_known or self._in_flight is not None:
            return None
        if info.heartbeats is Heartbeats.AT_ONCE or self._expedited:
            return self._backoff_until_ms
        return max(self._backoff_until_ms, self._next_interval_send_ms)

    def mark_sent(self, request_id: int, now_ms: int) -> None:
        """A (non-leave) heartbeat of any kind went out: one in flight, the interval restarts."""
        self._in_flight = request_id
        self._expedited = False
        self._last_sent_ms = now_ms
        self._next_interval_send_ms = now_ms + self.interval_ms

    def mark_leave(self, request_id: int) -> None:
        """A leave heartbeat went out: its answer will be ignored; the next join starts afresh."""
        self._leave_request_ids.add(request_id)
        self.forget_sent()
        self._failed_attempts = 0
        self._backoff_until_ms = 0

    # --- answers ----------------------------------------------------------------------------

    def take_answer(self, request_id: int) -> bool:
        """True if ``request_id`` is the non-leave heartbeat in flight; the answer to a leave
        heartbeat is consumed and ignored (False), as is any other late answer."""
        return not self.is_leave(request_id) and self.is_current(request_id)

    def is_current(self, request_id: int) -> bool:
        """True if ``request_id`` is the non-leave heartbeat in flight."""
        return self._in_flight == request_id

    def is_leave(self, request_id: int) -> bool:
        """True if ``request_id`` is a leave heartbeat (its answer is consumed and ignored)."""
        if request_id in self._leave_request_ids:
            self._leave_request_ids.discard(request_id)
            return True
        return False

    def on_success(self, heartbeat_interval_ms: int, now_ms: int) -> None:
        """The in-flight heartbeat succeeded; a new interval counts from when it was sent."""
        self._in_flight = None
        self._failed_attempts = 0
        if heartbeat_interval_ms > 0 and heartbeat_interval_ms != self.interval_ms:
            self.interval_ms = heartbeat_interval_ms
            self._next_interval_send_ms = self._last_sent_ms + heartbeat_interval_ms

    def on_failure(self, now_ms: int, *, reset_backoff: bool) -> None:
        """The in-flight heartbeat failed: full request next, retry after the backoff."""
        self._in_flight = None
        self.forget_sent()
        self._next_interval_send_ms = now_ms
        if reset_backoff:
            self._failed_attempts = 0
            self._backoff_until_ms = now_ms
        else:
            self._failed_attempts += 1
            self._backoff_until_ms = now_ms + self._backoff.delay_ms(self._failed_attempts)

    def reset_for_rejoin(self, now_ms: int) -> None:
        """Fenced or leaving: drop the in-flight request, reset backoff and sent-field memory."""
        self._in_flight = None
        self.forget_sent()
        self._failed_attempts = 0
        self._backoff_until_ms = now_ms
        self._next_interval_send_ms = now_ms
        self._expedited = False


def finds_coordinator(info: StateInfo) -> bool:
    """Whether a state described by ``info`` looks the coordinator up: every state with
    heartbeats, and those without that ask for it (``StateInfo.finds_coordinator``)."""
    return info.heartbeats is not Heartbeats.NONE or info.finds_coordinator
