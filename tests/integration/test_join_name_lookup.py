"""A joining member learns its topics' ids with its join heartbeat, against a real broker.

An assignment names topics by id. A member that resolved the id only when its first partitions
arrived paid a Metadata round trip before it could fetch their committed offsets (a 900-partition
topic: tens to hundreds of ms on a busy machine; docs/benchmarks.md, section 6). The runtime now
sends a Metadata request for the subscribed names alongside the join heartbeat. The second member
of a group gets its partitions in a later heartbeat (after the first released them), so by then
it must know the name: the test counts the id lookups made after the first member settled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from callback_timeline import all_partitions, wait_for_balanced
from consumer_support import (
    ConsumerFactory,
    make_consumer_fixture,  # noqa: F401 - the make_consumer fixture
)
from member_thread import Group, MemberThread

from consumer._runtime.group_requests import GroupRequests

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_a_joiner_needs_no_metadata_lookup_by_id_for_its_first_partitions(
    make_consumer: ConsumerFactory,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(partitions=4)
    group_id = unique_name("group")
    group = Group()
    lock = threading.Lock()
    by_id: list[Any] = []
    by_name: list[tuple[str, ...]] = []
    lookup_by_id = GroupRequests.metadata
    lookup_by_name = GroupRequests.resolve_names

    async def metadata(self: GroupRequests, command: Any) -> Any:
        with lock:
            by_id.append(command)
        return await lookup_by_id(self, command)

    async def resolve_names(self: GroupRequests, topic_names: tuple[str, ...]) -> Any:
        with lock:
            by_name.append(topic_names)
        return await lookup_by_name(self, topic_names)

    try:
        config = {"group.id": group_id, "auto.offset.reset": "earliest"}
        group.add(MemberThread("A", make_consumer(config), [topic], group.timeline))
        wait_for_balanced(group.timeline, ["A"], all_partitions(topic, 4))
        # From here on every lookup is counted: A knows its topic, B has not joined yet.
        monkeypatch.setattr(GroupRequests, "metadata", metadata)
        monkeypatch.setattr(GroupRequests, "resolve_names", resolve_names)
        group.add(MemberThread("B", make_consumer(config), [topic], group.timeline))
        final = wait_for_balanced(group.timeline, ["A", "B"], all_partitions(topic, 4))
        assert len(final["B"]) == 2, final
    finally:
        group.stop_all()
    with lock:
        assert by_name == [(topic,)], f"B's join should look its topic up by name: {by_name}"
        assert by_id == [], f"nobody should have needed an id lookup after the join: {by_id}"
