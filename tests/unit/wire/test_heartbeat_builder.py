"""An idle member's equal heartbeats reuse one kio request (HeartbeatRequestBuilder)."""

from __future__ import annotations

import pytest

from consumer._wire import HeartbeatRequestBuilder, build_heartbeat_request
from consumer.errors import UnsupportedBrokerError
from consumer.member import HeartbeatRequest


def content(epoch: int, regex: str | None = None) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id="g", member_id="m", member_epoch=epoch, subscribed_topic_regex=regex
    )


def test_equal_content_at_the_same_version_returns_the_same_request() -> None:
    builder = HeartbeatRequestBuilder()
    first = builder.build(content(5), 1)
    again = builder.build(content(5), 1)  # an equal, not the same, content object
    assert again is first
    assert first == build_heartbeat_request(content(5), 1)


def test_changed_content_or_version_builds_a_new_request() -> None:
    builder = HeartbeatRequestBuilder()
    first = builder.build(content(5), 1)
    changed = builder.build(content(6), 1)
    assert changed is not first
    assert changed == build_heartbeat_request(content(6), 1)
    older = builder.build(content(6), 0)
    assert older == build_heartbeat_request(content(6), 0)
    assert type(older) is not type(changed)  # v0 and v1 are different kio classes
    assert builder.build(content(6), 1) == changed  # back to v1: built again, equal


def test_a_refused_build_is_not_remembered() -> None:
    builder = HeartbeatRequestBuilder()
    first = builder.build(content(5), 1)
    with pytest.raises(UnsupportedBrokerError, match="regular expression"):
        builder.build(content(5, regex="t.*"), 0)
    assert builder.build(content(5), 1) is first
