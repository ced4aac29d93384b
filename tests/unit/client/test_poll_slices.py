"""How long poll() waits in librdkafka between serving the background (PollSlices, QuietWindow)."""

from __future__ import annotations

import time

import pytest

from consumer._bridge.quiet import QuietWindow
from consumer._client.polling import POLL_SLICE_S, PollSlices
from consumer.config import parse_config
from consumer.member import MemberState


def slices(quiet: QuietWindow, **config: object) -> PollSlices:
    return PollSlices(
        parse_config({"bootstrap.servers": "b:9092", "group.id": "g", **config}), quiet
    )


def test_the_window_bounds_a_slice_between_short_and_longest() -> None:
    quiet = QuietWindow()
    assert quiet.slice_s(100.0, 0.01, 0.25) == 0.01  # no promise: short slices
    quiet.promise(100.1)
    # Up to one short slice past the promised time: the timer's answer is usually in by then.
    assert quiet.slice_s(100.0, 0.01, 0.25) == pytest.approx(0.11)
    quiet.promise(105.0)
    assert quiet.slice_s(100.0, 0.01, 0.25) == 0.25
    assert quiet.slice_s(105.0, 0.01, 0.25) == pytest.approx(0.01)  # the promise has ended
    assert quiet.slice_s(105.5, 0.01, 0.25) == 0.01
    quiet.end()
    assert quiet.until_s == 0.0
    assert quiet.slice_s(100.0, 0.01, 0.25) == 0.01


def test_a_stable_member_waits_long_only_while_the_background_promises_quiet() -> None:
    quiet = QuietWindow()
    chooser = slices(quiet)
    assert chooser.slice_s(MemberState.STABLE) == POLL_SLICE_S
    # No background running (manual assignment): nothing can come from it.
    assert chooser.slice_s(None) == 1.0
    quiet.promise(time.monotonic() + 10)
    assert chooser.slice_s(MemberState.STABLE) == 1.0
    assert chooser.slice_s(None) == 1.0
    # A rebalance in progress always gets the shortest slice, whatever was promised.
    assert chooser.slice_s(MemberState.RECONCILE_ASSIGNMENT) < POLL_SLICE_S
    quiet.end()
    assert chooser.slice_s(MemberState.STABLE) == POLL_SLICE_S


def test_a_short_poll_interval_keeps_several_slices_per_interval() -> None:
    quiet = QuietWindow()
    quiet.promise(time.monotonic() + 10)
    chooser = slices(quiet, **{"max.poll.interval.ms": 400})
    assert chooser.slice_s(MemberState.STABLE) == pytest.approx(0.1)
