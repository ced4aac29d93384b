"""Broker-side regex subscription: a topic created after subscribing is picked up.

``subscribe(["^prefix-.*"])`` sends the pattern to the coordinator (``SubscribedTopicRegex``),
which resolves it against the cluster's topics and re-resolves it when topics are created (at
most every 10 s). The test subscribes two members to ``^<prefix>-.*`` with one matching topic,
creates a second matching topic and a non-matching one, and waits (up to ~40 s) for the group to
own every partition of both matching topics, balanced, and none of the non-matching topic.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from callback_timeline import (
    all_partitions,
    wait_for_balanced,
)
from consumer_support import (
    ConsumerFactory,
    check_extras,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
)
from member_thread import (
    Group,
    MemberThread,
)

pytestmark = pytest.mark.integration

#: Regexes are re-resolved at most every 10 s after a topic change; allow several rounds.
REGEX_PICKUP_S = 40.0


@pytest.mark.timeout(120)
def test_topic_created_after_subscribe_is_picked_up(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    prefix = unique_name("rx").replace("_", "-")
    first = create_topic(partitions=2, name=f"{prefix}-first")
    group_id = unique_name("group")
    group = Group()
    try:
        for name in ("A", "B"):
            consumer = make_consumer({"group.id": group_id, "auto.offset.reset": "earliest"})
            group.add(MemberThread(name, consumer, [f"^{prefix}-.*"], group.timeline))
        wait_for_balanced(group.timeline, ["A", "B"], all_partitions(first, 2), REGEX_PICKUP_S)

        later = create_topic(partitions=2, name=f"{prefix}-later")
        unrelated = create_topic(partitions=1, name=f"not-{prefix}-x")
        expected = all_partitions(first, 2) | all_partitions(later, 2)
        final = wait_for_balanced(group.timeline, ["A", "B"], expected, REGEX_PICKUP_S)

        owned = set().union(*final.values())
        assert not {tp for tp in owned if tp[0] == unrelated}, (
            "a topic not matching the pattern was assigned"
        )
        for member in group.members.values():
            check_extras(make_consumer, member.consumer, state="STABLE")
    finally:
        group.stop_all()
    group.timeline.assert_revoke_before_assign()
    group.assert_callbacks_on_poll_threads()
