"""ApiVersions (key 18): what the broker supports, including the v0 fallback.

A broker that does not know the ApiVersions version we sent answers with UNSUPPORTED_VERSION in
a **v0** body (KIP-511) listing the ApiVersions versions it does know, so the reply to a failed
v3 request must be decoded as v0 before retrying with a version from that list.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

from kio.schema.api_versions import v0, v1, v2, v3, v4
from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from consumer.errors import ProtocolError, error_for_code

from ._by_version import by_version
from .framing import decode_response_frame
from .versions import ApiKey, VersionRange

__all__ = [
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CLIENT_SOFTWARE_NAME",
    "build_api_versions_request",
    "decode_api_versions_frame",
    "parse_api_versions_response",
    "retry_version_after_unsupported",
]

CLIENT_SOFTWARE_NAME: Final = "kafka-group-member"

ApiVersionsRequest: TypeAlias = (
    v0.ApiVersionsRequest
    | v1.ApiVersionsRequest
    | v2.ApiVersionsRequest
    | v3.ApiVersionsRequest
    | v4.ApiVersionsRequest
)
ApiVersionsResponse: TypeAlias = (
    v0.ApiVersionsResponse
    | v1.ApiVersionsResponse
    | v2.ApiVersionsResponse
    | v3.ApiVersionsResponse
    | v4.ApiVersionsResponse
)
_REQUEST_TYPES: Final[Mapping[int, Callable[..., ApiVersionsRequest]]] = {
    0: v0.ApiVersionsRequest,
    1: v1.ApiVersionsRequest,
    2: v2.ApiVersionsRequest,
    3: v3.ApiVersionsRequest,
    4: v4.ApiVersionsRequest,
}
#: The first version that carries the client's software name and version.
_FIRST_SOFTWARE_NAME_VERSION: Final = 3
_RESPONSE_TYPES: Final[dict[int, type[ApiVersionsResponse]]] = {
    0: v0.ApiVersionsResponse,
    1: v1.ApiVersionsResponse,
    2: v2.ApiVersionsResponse,
    3: v3.ApiVersionsResponse,
    4: v4.ApiVersionsResponse,
}
_RESPONSE_CLASSES: Final = (
    v0.ApiVersionsResponse,
    v1.ApiVersionsResponse,
    v2.ApiVersionsResponse,
    v3.ApiVersionsResponse,
    v4.ApiVersionsResponse,
)
# The response header (v0) is a bare int32 correlation id; the error code follows it.
_ERROR_CODE_AFTER_HEADER: Final = struct.Struct(">ih")


def build_api_versions_request(
    version: int, *, software_name: str = CLIENT_SOFTWARE_NAME, software_version: str
) -> ApiVersionsRequest:
    """An ApiVersions request; v3+ carry our software name and version (``[a-zA-Z0-9.-]``)."""
    make_request = by_version("ApiVersions", version, _REQUEST_TYPES)
    if version < _FIRST_SOFTWARE_NAME_VERSION:
        return make_request()
    return make_request(
        client_software_name=software_name, client_software_version=software_version
    )


def decode_api_versions_frame(frame: bytes, requested_version: int) -> ApiVersionsResponse:
    """Decode the reply to an ApiVersions request of ``requested_version``.

    An UNSUPPORTED_VERSION reply is decoded with the v0 schema, as brokers send it.

    Raises:
        ProtocolError: the bytes are not an ApiVersions response.
    """
    if requested_version not in _RESPONSE_TYPES:
        raise ValueError(f"ApiVersions v{requested_version} is not supported (v0-v4)")
    if len(frame) < _ERROR_CODE_AFTER_HEADER.size:
        raise ProtocolError(f"ApiVersions response of {len(frame)} bytes is too short")
    _, error_code = _ERROR_CODE_AFTER_HEADER.unpack_from(frame)
    version = 0 if error_code == ErrorCode.unsupported_version else requested_version
    response_type: type[ApiVersionsResponse] = _RESPONSE_TYPES[version]
    _, response = decode_response_frame(frame, response_type)
    return response


def retry_version_after_unsupported(response: ApiVersionsResponse) -> int | None:
    """The ApiVersions version to retry with after UNSUPPORTED_VERSION, or None if none fits.

    The broker lists its own ApiVersions range; we take the highest version we also know.
    """
    if response.error_code != ErrorCode.unsupported_version:
        return None
    for entry in response.api_keys:
        if int(entry.api_key) == ApiKey.API_VERSIONS:
            highest = min(int(entry.max_version), max(_RESPONSE_TYPES))
            return highest if highest >= entry.min_version else None
    return 0


def parse_api_versions_response(response: ResponsePayload) -> Mapping[int, VersionRange]:
    """The broker's version range per API key.

    Raises:
        BrokerError: the response carries an error code (UNSUPPORTED_VERSION included; use
            :func:`retry_version_after_unsupported` first to fall back).
        ProtocolError: ``response`` is not an ApiVersions response.
    """
    if not isinstance(response, _RESPONSE_CLASSES):
        raise ProtocolError(f"expected an ApiVersions response, got {type(response).__name__}")
    if response.error_code != ErrorCode.none:
        raise error_for_code(response.error_code)
    ranges: dict[int, VersionRange] = {}
    for entry in response.api_keys:
        if entry.min_version <= entry.max_version:
            ranges[int(entry.api_key)] = VersionRange(
                int(entry.min_version), int(entry.max_version)
            )
    return ranges
