"""A synchronous commit waits only while the membership survives without a poll (no broker
needed: the budget is computed from the configuration and the time of the last poll)."""

from __future__ import annotations

import pytest

from consumer import Consumer
from consumer._client import consumer as consumer_module

CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "budget"}


@pytest.fixture
def now_ms(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    clock = [1_000_000]
    monkeypatch.setattr(consumer_module, "_monotonic_ms", lambda: clock[0])
    return clock


def budget(config: dict[str, object], last_poll_ms: int) -> int:
    consumer = Consumer({**CONFIG, **config})
    try:
        consumer._last_poll_report_ms = last_poll_ms
        return consumer._sync_commit_timeout_ms()
    finally:
        consumer.close()


def test_the_wait_ends_a_margin_before_the_poll_timer(now_ms: list[int]) -> None:
    # 5 s poll interval, last poll 1 s ago: 5 - 1 - 1.5 (margin) = 2.5 s
    assert budget({"max.poll.interval.ms": 5_000}, now_ms[0] - 1_000) == 2_500
    # 60 s poll interval: the margin is a tenth of it
    assert budget({"max.poll.interval.ms": 60_000}, now_ms[0]) == 54_000


def test_the_wait_is_capped_like_javas_default_api_timeout(now_ms: list[int]) -> None:
    assert budget({"max.poll.interval.ms": 300_000}, now_ms[0]) == 60_000


def test_an_exhausted_poll_budget_still_allows_one_short_attempt(now_ms: list[int]) -> None:
    assert budget({"max.poll.interval.ms": 5_000}, now_ms[0] - 10_000) == 1_000
