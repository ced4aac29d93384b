"""``alter_share_group_configs`` on the real broker: the values are visible when it returns, and
a refused value is a clear error."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource

from consumer.share_consumer import alter_share_group_configs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def described(admin: AdminClient, group_id: str) -> dict[str, str | None]:
    resource = ConfigResource("GROUP", group_id)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()}


def test_the_values_are_visible_when_it_returns(
    admin: AdminClient, unique_name: Callable[[str], str]
) -> None:
    group_id = unique_name("share")
    wanted = {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "3"}
    assert described(admin, group_id)["share.auto.offset.reset"] == "latest"
    alter_share_group_configs(admin, group_id, wanted)
    seen = described(admin, group_id)
    assert {name: seen[name] for name in wanted} == wanted


def test_a_refused_value_names_the_config(
    admin: AdminClient, unique_name: Callable[[str], str]
) -> None:
    with pytest.raises(KafkaException, match="share.auto.offset.reset"):
        alter_share_group_configs(
            admin, unique_name("share"), {"share.auto.offset.reset": "sometimes"}
        )
