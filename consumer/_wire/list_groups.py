"""ListGroups (key 16): the groups one broker coordinates, each with its type and state.

Only v5 is built: it is the first version that reports the group type (``consumer``,
``classic``, ``share``, ``streams``), and every Apache Kafka 4.x broker serves it. ListGroups is
answered per broker (each lists the groups it coordinates), so a cluster-wide list asks every
broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kio.schema.list_groups import v5
from kio.static.protocol import ResponsePayload

from consumer.errors import ProtocolError, error_or_none

from ._by_version import by_version

__all__ = [
    "ListGroupsRequest",
    "ListedGroup",
    "build_list_groups_request",
    "parse_list_groups_response",
]

ListGroupsRequest = v5.ListGroupsRequest
_REQUEST_TYPES: Final[Mapping[int, Callable[..., ListGroupsRequest]]] = {
    5: v5.ListGroupsRequest,
}


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One group as a broker lists it: ``group_type`` and ``state`` as the broker spells them
    (``"consumer"``, ``"share"``, ``"classic"``; ``"Stable"``, ``"Empty"``, ...)."""

    group_id: str
    group_type: str
    state: str
    protocol_type: str


def build_list_groups_request(
    version: int, *, types: Sequence[str] = (), states: Sequence[str] = ()
) -> ListGroupsRequest:
    """A ListGroups request (v5); empty ``types`` / ``states`` list every group."""
    make_request = by_version("ListGroups", version, _REQUEST_TYPES)
    return make_request(types_filter=tuple(types), states_filter=tuple(states))


def parse_list_groups_response(response: ResponsePayload) -> list[ListedGroup]:
    """The listed groups.

    Raises:
        BrokerError: the broker answered with an error (e.g. COORDINATOR_LOAD_IN_PROGRESS).
        ProtocolError: ``response`` is not a ListGroups v5 response.
    """
    if not isinstance(response, v5.ListGroupsResponse):
        raise ProtocolError(f"expected a ListGroups v5 response, got {type(response).__name__}")
    error = error_or_none(response.error_code)
    if error is not None:
        raise error
    return [
        ListedGroup(
            group_id=group.group_id,
            group_type=group.group_type,
            state=group.group_state,
            protocol_type=group.protocol_type,
        )
        for group in response.groups or ()  # kio reads a null array as None
    ]
