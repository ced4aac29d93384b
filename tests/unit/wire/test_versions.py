"""Version negotiation: highest common version per API, typed errors for missing APIs."""

from __future__ import annotations

import pytest

from consumer._wire import (
    ALL_GROUP_APIS,
    KIP848_MISSING_MESSAGE,
    ApiKey,
    VersionRange,
    negotiate_versions,
)
from consumer.errors import UnsupportedBrokerError

KAFKA_4_3: dict[int, VersionRange] = {
    3: VersionRange(0, 13),
    8: VersionRange(2, 10),
    9: VersionRange(1, 10),
    10: VersionRange(0, 6),
    18: VersionRange(0, 4),
    68: VersionRange(0, 1),
    69: VersionRange(0, 1),
    1: VersionRange(4, 17),  # an API we do not use is ignored
}


def _broker(**changes: VersionRange | None) -> dict[int, VersionRange]:
    broker = dict(KAFKA_4_3)
    for name, value in changes.items():
        key = int(ApiKey[name])
        if value is None:
            broker.pop(key)
        else:
            broker[key] = value
    return broker


@pytest.mark.parametrize(
    ("broker", "api_key", "expected"),
    [
        (KAFKA_4_3, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1),
        (KAFKA_4_3, ApiKey.OFFSET_COMMIT, 10),
        (KAFKA_4_3, ApiKey.OFFSET_FETCH, 10),
        (KAFKA_4_3, ApiKey.METADATA, 13),
        (KAFKA_4_3, ApiKey.FIND_COORDINATOR, 6),
        (KAFKA_4_3, ApiKey.API_VERSIONS, 4),
        (KAFKA_4_3, ApiKey.CONSUMER_GROUP_DESCRIBE, 1),
        (_broker(CONSUMER_GROUP_HEARTBEAT=VersionRange(0, 0)), ApiKey.CONSUMER_GROUP_HEARTBEAT, 0),
        (_broker(CONSUMER_GROUP_HEARTBEAT=VersionRange(0, 5)), ApiKey.CONSUMER_GROUP_HEARTBEAT, 1),
        (_broker(OFFSET_COMMIT=VersionRange(2, 9)), ApiKey.OFFSET_COMMIT, 9),
        (_broker(OFFSET_FETCH=VersionRange(1, 9)), ApiKey.OFFSET_FETCH, 9),
        (_broker(METADATA=VersionRange(0, 12)), ApiKey.METADATA, 12),
        (_broker(METADATA=VersionRange(11, 20)), ApiKey.METADATA, 13),
        (_broker(FIND_COORDINATOR=VersionRange(0, 3)), ApiKey.FIND_COORDINATOR, 3),
        (_broker(API_VERSIONS=VersionRange(0, 3)), ApiKey.API_VERSIONS, 3),
    ],
)
def test_highest_common_version_is_chosen(
    broker: dict[int, VersionRange], api_key: ApiKey, expected: int
) -> None:
    negotiated = negotiate_versions(broker, required=ALL_GROUP_APIS)
    assert negotiated.version_for(api_key) == expected
    assert negotiated.supports(api_key, expected)


@pytest.mark.parametrize(
    ("broker", "missing", "message"),
    [
        (_broker(CONSUMER_GROUP_HEARTBEAT=None), ApiKey.CONSUMER_GROUP_HEARTBEAT, "KIP-848"),
        (
            _broker(CONSUMER_GROUP_HEARTBEAT=VersionRange(2, 3)),
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            "KIP-848",
        ),
        (_broker(OFFSET_COMMIT=VersionRange(0, 8)), ApiKey.OFFSET_COMMIT, "OffsetCommit"),
        (_broker(OFFSET_FETCH=None), ApiKey.OFFSET_FETCH, "OffsetFetch"),
        (_broker(METADATA=VersionRange(0, 9)), ApiKey.METADATA, "Metadata"),
        (_broker(FIND_COORDINATOR=None), ApiKey.FIND_COORDINATOR, "FindCoordinator"),
    ],
)
def test_missing_required_api_raises_unsupported_broker(
    broker: dict[int, VersionRange], missing: ApiKey, message: str
) -> None:
    with pytest.raises(UnsupportedBrokerError, match=message):
        negotiate_versions(broker, required=ALL_GROUP_APIS)
    negotiated = negotiate_versions(broker)  # nothing required: the gap shows on use
    assert not negotiated.supports(missing)
    with pytest.raises(UnsupportedBrokerError, match=message):
        negotiated.version_for(missing)


def test_a_kafka_3_broker_gets_the_kip848_message_first() -> None:
    kafka_3_7 = _broker(
        CONSUMER_GROUP_HEARTBEAT=None,
        CONSUMER_GROUP_DESCRIBE=None,
        OFFSET_COMMIT=VersionRange(0, 9),
        OFFSET_FETCH=VersionRange(0, 9),
    )
    with pytest.raises(UnsupportedBrokerError) as caught:
        negotiate_versions(kafka_3_7, required=ALL_GROUP_APIS)
    assert str(caught.value).startswith(KIP848_MISSING_MESSAGE)
    assert "ConsumerGroupHeartbeat (68)" in str(caught.value)


def test_optional_api_missing_does_not_fail_negotiation() -> None:
    negotiated = negotiate_versions(_broker(CONSUMER_GROUP_DESCRIBE=None), required=ALL_GROUP_APIS)
    assert not negotiated.supports(ApiKey.CONSUMER_GROUP_DESCRIBE)
    assert negotiated.version_for(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 1


def test_supports_checks_both_sides_for_an_exact_version() -> None:
    negotiated = negotiate_versions(_broker(OFFSET_COMMIT=VersionRange(9, 9)))
    assert negotiated.supports(ApiKey.OFFSET_COMMIT, 9)
    assert not negotiated.supports(ApiKey.OFFSET_COMMIT, 10)
    assert not negotiated.supports(ApiKey.OFFSET_COMMIT, 8)


def test_empty_version_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty"):
        VersionRange(3, 2)
