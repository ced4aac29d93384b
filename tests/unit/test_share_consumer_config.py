"""ShareConsumer configuration: checked before anything starts; errors name the key."""

from __future__ import annotations

import pytest

from consumer import ConfigError, ShareConsumer
from consumer.share.fetch_parameters import AcquireMode
from consumer.share_consumer import parse_share_config

BASE = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}


def test_defaults_are_implicit_mode_and_500_records() -> None:
    parsed = parse_share_config(BASE)
    assert parsed.acknowledgement_mode == "implicit"
    assert parsed.fetch.max_records == 500
    assert parsed.common.group_id == "g"


def test_share_keys_are_read_not_refused() -> None:
    parsed = parse_share_config(
        {
            **BASE,
            "share.acknowledgement.mode": "EXPLICIT",
            "max.poll.records": 7,
            "share.acquire.mode": "record_limit",
            "fetch.wait.max.ms": 200,
            "client.id": "me",
        }
    )
    assert parsed.acknowledgement_mode == "explicit"
    assert (parsed.fetch.max_records, parsed.fetch.max_wait_ms) == (7, 200)
    assert parsed.fetch.acquire_mode is AcquireMode.RECORD_LIMIT
    assert parsed.common.client_id == "me"


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ({"bootstrap.servers": "127.0.0.1:9092"}, "'group.id' is required"),
        ({"group.id": "g"}, "'bootstrap.servers' is required"),
        ({**BASE, "share.acknowledgement.mode": "auto"}, "'share.acknowledgement.mode'"),
        ({**BASE, "max.poll.records": 0}, "max.poll.records"),
        ({**BASE, "share.acquire.mode": "greedy"}, "share.acquire.mode"),
        ({**BASE, "security.protocol": "carrier-pigeon"}, "'security.protocol'"),
        ({**BASE, "max.poll.recrods": 5}, "did you mean"),
    ],
)
def test_bad_configuration_is_refused_naming_the_key(conf: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ShareConsumer(conf)


def test_configuration_must_be_a_dict() -> None:
    with pytest.raises(ConfigError, match="dict"):
        parse_share_config([("group.id", "g")])  # type: ignore[arg-type]
