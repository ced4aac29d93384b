"""A blocking ApiVersions call, used to decide when a local broker is ready.

Kept synchronous and tiny on purpose: the launcher and ``kgm broker status`` run it from plain
threads, outside any event loop. Encoding and decoding are kio's.
"""

from __future__ import annotations

import io
import socket
import struct

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

_CORRELATION_ID = 1


def probe_api_keys(host: str, port: int, timeout_s: float = 2.0) -> set[int]:
    """Send ApiVersions v3 to ``host:port`` and return the API keys the broker advertises.

    Raises ``OSError`` (including ``TimeoutError`` and ``ConnectionError``) when nothing usable
    answers; the caller decides whether to retry.
    """
    body = io.BytesIO()
    entity_writer(RequestHeader)(
        body,
        RequestHeader(
            request_api_key=ApiVersionsRequest.__api_key__,
            request_api_version=ApiVersionsRequest.__version__,
            correlation_id=i32(_CORRELATION_ID),
            client_id="kgm-probe",
        ),
    )
    entity_writer(ApiVersionsRequest)(
        body,
        ApiVersionsRequest(client_software_name="kgm-probe", client_software_version="1"),
    )
    payload = body.getvalue()
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        if not 0 < size < 1_000_000:
            raise ConnectionError(f"{host}:{port} answered with a frame of {size} bytes: not Kafka")
        frame = _read_exactly(sock, size)
    # ApiVersions responses always use response header v0, even at flexible versions.
    header, offset = entity_reader(ResponseHeader)(frame, 0)
    if header.correlation_id != _CORRELATION_ID:
        raise ConnectionError(f"{host}:{port} answered an unexpected correlation id: not Kafka")
    response, _ = entity_reader(ApiVersionsResponse)(frame, offset)
    if response.error_code.value != 0:
        raise ConnectionError(f"ApiVersions failed with {response.error_code.name}")
    return {int(api.api_key) for api in response.api_keys} if response.api_keys else set()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("the peer closed the connection mid-response")
        chunks += chunk
    return bytes(chunks)


__all__ = ["probe_api_keys"]
