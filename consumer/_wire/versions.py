"""API keys this SDK speaks, the versions it supports, and negotiation with a broker.

:func:`negotiate_versions` is a pure function: given what we support and what a broker
advertised in ApiVersions, it picks the highest common version per API.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from consumer.errors import UnsupportedBrokerError

__all__ = [
    "ALL_GROUP_APIS",
    "KIP848_MISSING_MESSAGE",
    "KIP932_MISSING_MESSAGE",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "NegotiatedVersions",
    "VersionRange",
    "api_label",
    "negotiate_versions",
]


class ApiKey(enum.IntEnum):
    """The Kafka APIs this SDK sends, by their protocol key."""

    LIST_OFFSETS = 2
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    METADATA = 3
    FIND_COORDINATOR = 10
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of API versions."""

    min_version: int
    max_version: int

    def __post_init__(self) -> None:
        if self.min_version > self.max_version:
            raise ValueError(f"empty version range {self.min_version}..{self.max_version}")

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version

    def __str__(self) -> str:
        return f"v{self.min_version}-v{self.max_version}"


SUPPORTED_VERSIONS: Final[Mapping[ApiKey, VersionRange]] = MappingProxyType(
    {
        # v0-v2 can be decoded by any broker; v3+ is flexible and sends our software name.
        ApiKey.API_VERSIONS: VersionRange(0, 4),
        # v10+ returns topic ids; v12+ can look topics up by id.
        ApiKey.METADATA: VersionRange(10, 13),
        # v0-v3 take one key; v4+ take a batch of coordinator keys.
        ApiKey.FIND_COORDINATOR: VersionRange(0, 6),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),
        # v9 is the first a consumer-protocol member may use; v10 addresses topics by id.
        ApiKey.OFFSET_COMMIT: VersionRange(9, 10),
        ApiKey.OFFSET_FETCH: VersionRange(9, 10),
        ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),
        # The reset policy's start offsets (earliest -2, latest -1); v6+ is flexible.
        ApiKey.LIST_OFFSETS: VersionRange(6, 10),
        # v0 was early access (Apache Kafka 4.0) and is gone; v1 is KIP-932 as released.
        ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),
        # ShareFetch, ShareAcknowledge: v1 is stable KIP-932 (4.1+); v2 (4.2+) adds the acquire
        # mode and RENEW.
        ApiKey.SHARE_FETCH: VersionRange(1, 2),
        ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 2),
        # Admin reads of ``kgm group``: ListGroups v5 reports the group type; ShareGroupDescribe
        # has only v1; DescribeShareGroupOffsets v1 (4.2+) adds the lag (KIP-1226).
        ApiKey.LIST_GROUPS: VersionRange(5, 5),
        ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 1),
    }
)
"""What this SDK can build and parse, per API (all within what kio models)."""

ALL_GROUP_APIS: Final[frozenset[ApiKey]] = frozenset(
    {
        ApiKey.METADATA,
        ApiKey.FIND_COORDINATOR,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
    }
)
"""The APIs a consumer-group member cannot work without."""

KIP848_MISSING_MESSAGE: Final = (
    "this broker does not support the KIP-848 consumer group protocol "
    "(needs Apache Kafka 4.0+ with group.version>=1)"
)

KIP932_MISSING_MESSAGE: Final = (
    "this broker does not support the KIP-932 share group protocol "
    "(needs ShareGroupHeartbeat v1: Apache Kafka 4.2+, or 4.1 with share.version=1)"
)

_API_LABELS: Final[Mapping[ApiKey, str]] = {
    ApiKey.LIST_OFFSETS: "ListOffsets",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.METADATA: "Metadata",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    ApiKey.SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat",
    ApiKey.SHARE_FETCH: "ShareFetch",
    ApiKey.SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    ApiKey.LIST_GROUPS: "ListGroups",
    ApiKey.SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
}


def api_label(api_key: int) -> str:
    """A readable name for an API key: ``ConsumerGroupHeartbeat (68)``."""
    try:
        return f"{_API_LABELS[ApiKey(api_key)]} ({api_key})"
    except ValueError:
        return f"API key {api_key}"


def _unsupported_message(api_key: ApiKey, ours: VersionRange, theirs: VersionRange | None) -> str:
    if api_key in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE):
        detail = "not advertised" if theirs is None else f"broker has {theirs}, we need {ours}"
        return f"{KIP848_MISSING_MESSAGE}: {api_label(api_key)} {detail}"
    if api_key is ApiKey.SHARE_GROUP_HEARTBEAT:
        detail = "not advertised" if theirs is None else f"broker has {theirs}, we need {ours}"
        return f"{KIP932_MISSING_MESSAGE}: {api_label(api_key)} {detail}"
    if theirs is None:
        return f"this broker does not offer {api_label(api_key)}, which this client needs"
    return f"this broker supports {api_label(api_key)} {theirs} but this client needs {ours}" + (
        " (committing as a consumer-protocol member needs v9+, Apache Kafka 4.0+)"
        if api_key in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH)
        else ""
    )


@dataclass(frozen=True)
class NegotiatedVersions:
    """The version to use per API on one broker connection, and what the broker advertised."""

    chosen: Mapping[ApiKey, int]
    broker_ranges: Mapping[int, VersionRange] = field(default_factory=dict)
    supported: Mapping[ApiKey, VersionRange] = field(default_factory=lambda: SUPPORTED_VERSIONS)

    def version_for(self, api_key: ApiKey) -> int:
        """The highest version both sides support.

        Raises:
            UnsupportedBrokerError: the broker lacks the API or every version we support.
        """
        try:
            return self.chosen[api_key]
        except KeyError:
            raise UnsupportedBrokerError(
                _unsupported_message(
                    api_key, self.supported[api_key], self.broker_ranges.get(api_key)
                )
            ) from None

    def supports(self, api_key: ApiKey, version: int | None = None) -> bool:
        """Whether the API (and, if given, that exact version) is usable on this connection."""
        if api_key not in self.chosen:
            return False
        if version is None:
            return True
        broker = self.broker_ranges.get(api_key)
        return version in self.supported[api_key] and broker is not None and version in broker


def negotiate_versions(
    broker_ranges: Mapping[int, VersionRange],
    *,
    required: Iterable[ApiKey] = (),
    supported: Mapping[ApiKey, VersionRange] = SUPPORTED_VERSIONS,
) -> NegotiatedVersions:
    """Pick the highest common version of every API in ``supported``.

    Args:
        broker_ranges: what the broker advertised, by API key (unknown keys are ignored).
        required: APIs that must be usable; a missing one raises at once.
        supported: our side (defaults to :data:`SUPPORTED_VERSIONS`).

    Raises:
        UnsupportedBrokerError: a required API is missing or shares no version with us.
            ConsumerGroupHeartbeat (68) missing reads "this broker does not support the KIP-848
            consumer group protocol ...".
    """
    chosen: dict[ApiKey, int] = {}
    for api_key, ours in supported.items():
        theirs = broker_ranges.get(api_key)
        if theirs is None:
            continue
        highest = min(ours.max_version, theirs.max_version)
        if highest >= max(ours.min_version, theirs.min_version):
            chosen[api_key] = highest
    negotiated = NegotiatedVersions(
        chosen=MappingProxyType(chosen),
        broker_ranges=MappingProxyType(dict(broker_ranges)),
        supported=supported,
    )
    # Check the KIP-848 API first so its message wins when several are missing.
    for api_key in sorted(required, key=lambda key: key != ApiKey.CONSUMER_GROUP_HEARTBEAT):
        negotiated.version_for(api_key)
    return negotiated
