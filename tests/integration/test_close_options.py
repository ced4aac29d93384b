"""``close(group_membership=..., timeout=...)``, Java's ``CloseOptions`` (KIP-1092), against the
real broker: ConsumerGroupDescribe shows the member gone at once or still in the group."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from consumer import CloseOption, Consumer
from tests.integration.consumer_support import CONVERGENCE_S, SESSION_TIMEOUT_S
from tests.support import holds_for, wait_until

pytestmark = pytest.mark.integration

#: A leave heartbeat removes the member well within this (the session timeout is 6 s).
_LEFT_AT_ONCE_S = SESSION_TIMEOUT_S / 2
#: How long a member that remains must still be listed right after close().
_STILL_THERE_S = 1.5


def _member_ids(admin: AdminClient, group: str) -> set[str]:
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return {member.member_id for member in description.members}


def _joined(bootstrap: str, group: str, topic: str, **config: Any) -> Consumer:
    """A member of ``group`` that owns ``topic``'s partition."""
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    member.subscribe([topic])

    def stable() -> bool:
        member.poll(0.1)
        return member.state == "STABLE" and bool(member.assignment())

    wait_until(stable, CONVERGENCE_S, f"{group}: a STABLE member", lambda: member.state)
    return member


@pytest.mark.parametrize(
    ("static", "option", "stays"),
    [
        (False, None, False),  # plain close(): a dynamic member leaves
        (False, CloseOption.LEAVE_GROUP, False),
        (False, CloseOption.REMAIN_IN_GROUP, True),
        (True, None, True),  # a static member keeps its seat (epoch -2)
        (True, CloseOption.REMAIN_IN_GROUP, True),
        (True, CloseOption.LEAVE_GROUP, False),
    ],
    ids=["dynamic", "dynamic-leave", "dynamic-remain", "static", "static-remain", "static-leave"],
)
def test_close_leaves_or_remains_in_the_group(
    kafka_bootstrap: str,
    admin: AdminClient,
    create_topic: Any,
    unique_name: Any,
    static: bool,
    option: CloseOption | None,
    stays: bool,
) -> None:
    topic = create_topic(partitions=1)
    group = unique_name("close")
    config = {"group.instance.id": "instance-1"} if static else {}
    member = _joined(kafka_bootstrap, group, topic, **config)
    member_id = member.memberid()
    assert member_id in _member_ids(admin, group)

    if option is None:
        member.close()
    else:
        member.close(group_membership=option)

    if stays:
        holds_for(
            lambda: member_id in _member_ids(admin, group),
            _STILL_THERE_S,
            f"the member still in the group after close({option})",
            interval_s=0.3,
        )
    else:
        wait_until(
            lambda: member_id not in _member_ids(admin, group),
            _LEFT_AT_ONCE_S,
            f"the member gone from the group after close({option})",
        )


def test_a_dynamic_member_that_remains_is_removed_at_the_session_timeout(
    kafka_bootstrap: str, admin: AdminClient, create_topic: Any, unique_name: Any
) -> None:
    topic = create_topic(partitions=1)
    group = unique_name("close-remain")
    member = _joined(kafka_bootstrap, group, topic)
    member_id = member.memberid()
    member.close(group_membership="remain_in_group", timeout=5.0)
    closed_at = time.monotonic()
    wait_until(
        lambda: member_id not in _member_ids(admin, group),
        SESSION_TIMEOUT_S + CONVERGENCE_S,
        "the broker removing the silent member",
    )
    assert time.monotonic() - closed_at > SESSION_TIMEOUT_S / 2


def test_a_close_timeout_bounds_the_close_and_bad_options_are_refused(
    kafka_bootstrap: str, create_topic: Any, unique_name: Any
) -> None:
    topic = create_topic(partitions=1)
    member = _joined(kafka_bootstrap, unique_name("close-timeout"), topic)
    for bad in ({"group_membership": "stay"}, {"timeout": -1}):
        with pytest.raises(KafkaException) as caught:
            member.close(**bad)
        assert caught.value.args[0].code() == KafkaError._INVALID_ARG
    started = time.monotonic()
    member.close(timeout=0)
    # timeout=0 still gives the loop its minimal stop time to send the leave heartbeat.
    assert time.monotonic() - started < 3.0
    with pytest.raises(RuntimeError):
        member.poll(0)
