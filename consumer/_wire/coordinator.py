"""FindCoordinator (key 10): which broker coordinates a group.

v4+ batch several coordinator keys into one request; v0-v3 carry a single key, so a batch falls
back to one request per key (:func:`build_find_coordinator_requests`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.schema.find_coordinator import v0, v1, v2, v3, v4, v5, v6
from kio.static.primitive import i8
from kio.static.protocol import ResponsePayload

from consumer.errors import BrokerError, ProtocolError, error_or_none

from ._by_version import by_version

__all__ = [
    "CoordinatorKeyType",
    "CoordinatorLocation",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "build_find_coordinator_request",
    "build_find_coordinator_requests",
    "parse_find_coordinator_response",
]

FindCoordinatorRequest: TypeAlias = (
    v0.FindCoordinatorRequest
    | v1.FindCoordinatorRequest
    | v2.FindCoordinatorRequest
    | v3.FindCoordinatorRequest
    | v4.FindCoordinatorRequest
    | v5.FindCoordinatorRequest
    | v6.FindCoordinatorRequest
)
FindCoordinatorResponse: TypeAlias = (
    v0.FindCoordinatorResponse
    | v1.FindCoordinatorResponse
    | v2.FindCoordinatorResponse
    | v3.FindCoordinatorResponse
    | v4.FindCoordinatorResponse
    | v5.FindCoordinatorResponse
    | v6.FindCoordinatorResponse
)
_SINGLE_KEY_RESPONSES: Final = (
    v0.FindCoordinatorResponse,
    v1.FindCoordinatorResponse,
    v2.FindCoordinatorResponse,
    v3.FindCoordinatorResponse,
)
_BATCHED_RESPONSES: Final = (
    v4.FindCoordinatorResponse,
    v5.FindCoordinatorResponse,
    v6.FindCoordinatorResponse,
)
_FIRST_BATCHED_VERSION: Final = 4
_REQUEST_TYPES: Final[Mapping[int, Callable[..., FindCoordinatorRequest]]] = {
    0: v0.FindCoordinatorRequest,
    1: v1.FindCoordinatorRequest,
    2: v2.FindCoordinatorRequest,
    3: v3.FindCoordinatorRequest,
    4: v4.FindCoordinatorRequest,
    5: v5.FindCoordinatorRequest,
    6: v6.FindCoordinatorRequest,
}


class CoordinatorKeyType(enum.IntEnum):
    """What a coordinator key names."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2


@dataclass(frozen=True, slots=True)
class CoordinatorLocation:
    """The coordinator of one key, or the error the broker gave for it."""

    key: str
    node_id: int
    host: str
    port: int
    error: BrokerError | None = None


def build_find_coordinator_request(
    version: int, key: str, *, key_type: CoordinatorKeyType = CoordinatorKeyType.GROUP
) -> FindCoordinatorRequest:
    """A FindCoordinator request for one key (a group id by default), at any version 0-6."""
    return _build(version, [key], key_type)


def build_find_coordinator_requests(
    version: int,
    keys: Sequence[str],
    *,
    key_type: CoordinatorKeyType = CoordinatorKeyType.GROUP,
) -> list[FindCoordinatorRequest]:
    """Requests covering ``keys``: one batched request at v4+, one request per key below."""
    if not keys:
        raise ValueError("at least one coordinator key is needed")
    if version >= _FIRST_BATCHED_VERSION:
        return [_build(version, list(keys), key_type)]
    return [_build(version, [key], key_type) for key in keys]


def _build(version: int, keys: list[str], key_type: CoordinatorKeyType) -> FindCoordinatorRequest:
    if version < _FIRST_BATCHED_VERSION and len(keys) != 1:
        raise ValueError(f"FindCoordinator v{version} carries exactly one key")
    if version == 0 and key_type != CoordinatorKeyType.GROUP:
        raise ValueError("FindCoordinator v0 only looks up groups")
    kind = i8(int(key_type))
    make_request = by_version("FindCoordinator", version, _REQUEST_TYPES)
    if version == 0:
        return make_request(key=keys[0])
    if version < _FIRST_BATCHED_VERSION:
        return make_request(key=keys[0], key_type=kind)
    return make_request(key_type=kind, coordinator_keys=tuple(keys))


def parse_find_coordinator_response(
    response: ResponsePayload, *, single_key: str | None = None
) -> list[CoordinatorLocation]:
    """The coordinator (or error) per key.

    Args:
        response: a FindCoordinator response of any version.
        single_key: the key sent in a v0-v3 request (those responses do not repeat it).

    Raises:
        ProtocolError: ``response`` is not a FindCoordinator response.
    """
    if isinstance(response, _BATCHED_RESPONSES):
        return [
            CoordinatorLocation(
                key=entry.key,
                node_id=int(entry.node_id),
                host=entry.host,
                port=int(entry.port),
                error=error_or_none(entry.error_code, entry.error_message),
            )
            for entry in response.coordinators
        ]
    if isinstance(response, _SINGLE_KEY_RESPONSES):
        message = (
            None if isinstance(response, v0.FindCoordinatorResponse) else response.error_message
        )
        return [
            CoordinatorLocation(
                key=single_key or "",
                node_id=int(response.node_id),
                host=response.host,
                port=int(response.port),
                error=error_or_none(response.error_code, message),
            )
        ]
    raise ProtocolError(f"expected a FindCoordinator response, got {type(response).__name__}")
