"""Fuzzing the wire layer: truncated, mutated and random response frames (no broker).

Claims: whatever bytes arrive, the decoder and the parsers raise only our typed errors
(:class:`consumer.errors.ConsumerError` subclasses) and never hang; and a
:class:`~consumer._runtime.connection.BrokerConnection` answered with mutated bytes fails the
request with a typed error, drops the connection and opens a new one for the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.constants import EntityType
from kio.static.primitive import Records, i16
from kio.static.protocol import ResponsePayload

from consumer._runtime.connection import BrokerConnection
from consumer._runtime.retry import RetryPolicy
from consumer._wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    FrameDecoder,
    build_metadata_request,
    decode_api_versions_frame,
    decode_request_frame,
    decode_response_frame,
    encode_response_frame,
    parse_api_versions_response,
    parse_consumer_group_describe_response,
    parse_describe_share_group_offsets_response,
    parse_find_coordinator_response,
    parse_heartbeat_response,
    parse_list_groups_response,
    parse_list_offsets_response,
    parse_metadata_response,
    parse_offset_commit_response,
    parse_offset_fetch_response,
    parse_share_acknowledge_response,
    parse_share_fetch_response,
    parse_share_group_describe_response,
    request_type_for,
    response_type_for,
)
from consumer._wire._units import i32_timedelta_from_ms
from consumer._wire.share_heartbeat import parse_share_heartbeat_response
from consumer.errors import ConsumerError

pytestmark = pytest.mark.reliability

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
#: What the mutating server advertises: ApiVersions, and Metadata v12 only.
ADVERTISED = {int(ApiKey.API_VERSIONS): (0, 4), int(ApiKey.METADATA): (12, 12)}
TOPIC = uuid.UUID("0b8c1d5e-2f3a-4b6c-8d9e-0f1a2b3c4d5e")

# The root conftest does this too; the child process loads no conftest.
st.register_type_strategy(Records, st.binary(max_size=256).map(Records))

PARSERS: dict[ApiKey, Callable[[ResponsePayload], Any]] = {
    ApiKey.API_VERSIONS: parse_api_versions_response,
    ApiKey.METADATA: parse_metadata_response,
    ApiKey.FIND_COORDINATOR: lambda r: parse_find_coordinator_response(r, single_key="g"),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: parse_heartbeat_response,
    ApiKey.OFFSET_COMMIT: lambda r: parse_offset_commit_response(r, topic_names_by_id={TOPIC: "t"}),
    ApiKey.OFFSET_FETCH: lambda r: parse_offset_fetch_response(r, topic_names_by_id={TOPIC: "t"}),
    ApiKey.CONSUMER_GROUP_DESCRIBE: parse_consumer_group_describe_response,
    ApiKey.SHARE_GROUP_HEARTBEAT: parse_share_heartbeat_response,
    ApiKey.SHARE_FETCH: parse_share_fetch_response,
    ApiKey.SHARE_ACKNOWLEDGE: parse_share_acknowledge_response,
    ApiKey.LIST_GROUPS: parse_list_groups_response,
    ApiKey.SHARE_GROUP_DESCRIBE: parse_share_group_describe_response,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: parse_describe_share_group_offsets_response,
    ApiKey.LIST_OFFSETS: parse_list_offsets_response,
}

RESPONSE_TYPES: list[tuple[ApiKey, type[ResponsePayload]]] = [
    (key, response_type_for(request_type_for(int(key), version)))
    for key, versions in SUPPORTED_VERSIONS.items()
    for version in range(versions.min_version, versions.max_version + 1)
]
IDS = [f"{t.__name__}-v{t.__version__}" for _k, t in RESPONSE_TYPES]


def only_typed_errors(action: Callable[[], object]) -> object:
    """Run ``action``; a non-ConsumerError exception fails the test (with the exception)."""
    try:
        return action()
    except ConsumerError:
        return None


def decode_and_parse(key: ApiKey, response_type: type[ResponsePayload], frame: bytes) -> None:
    if key is ApiKey.API_VERSIONS:
        version = int(response_type.__version__)
        decoded = only_typed_errors(lambda: decode_api_versions_frame(frame, version))
    else:
        pair = only_typed_errors(lambda: decode_response_frame(frame, response_type))
        decoded = None if pair is None else pair[1]  # type: ignore[index]
    if decoded is not None:
        only_typed_errors(lambda: PARSERS[key](decoded))  # type: ignore[arg-type]


@st.composite
def mutated(draw: st.DrawFn, frame: bytes) -> bytes:
    """``frame`` truncated, with bytes flipped, inserted, deleted, or all of these."""
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "int"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "truncate":
            del data[at:]
        elif op == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:  # overwrite with an extreme 32-bit value (lengths, counts, epochs)
            value = draw(st.sampled_from([-1, -2, 0, 2**31 - 1, -(2**31), 0x7FFF, 0xFFFF]))
            data[at : at + 4] = struct.pack(">i", value)
    return bytes(data)


CHILD = Path(__file__).with_name("fuzz_wire_child.py")


@pytest.mark.parametrize("mode", ["mutated", "random"])
def test_response_frames_raise_only_typed_errors(mode: str, tmp_path: Path) -> None:
    """Valid frames of every response type we decode, and those frames truncated / mutated
    (``mutated``), or random bytes (``random``): decoding and parsing raise only
    ConsumerError subclasses. Runs in a child process, so that a crash of the native decoder
    (an abort that would take pytest down) is reported with its input, and the fuzzing goes on
    with the next response type."""
    progress = tmp_path / "progress.txt"
    crashes: list[str] = []
    start = 0
    while start < len(RESPONSE_TYPES):
        child = subprocess.run(
            [sys.executable, str(CHILD), mode, str(start), str(progress)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        last = progress.read_text().strip() if progress.exists() else ""
        if child.returncode == 0 and last == "done":
            break
        index_text, _, frame_hex = last.partition(" ")
        index = int(index_text) if index_text.isdigit() else start
        tail = [line for line in (child.stdout + child.stderr).splitlines() if line.strip()]
        summary = next((line for line in tail if "memory allocation" in line), "")
        summary = summary or (tail[-1] if tail else "")
        crashes.append(
            f"{IDS[index]}: exit status {child.returncode} ({summary}); "
            f"input frame {frame_hex[:200]}"
            + ("" if child.returncode != 1 else "\n" + "\n".join(tail[-25:]))
        )
        start = index + 1
    assert not crashes, "decoding did not end in a typed error:\n" + "\n".join(crashes)


#: A ConsumerGroupHeartbeat v0 response frame (header included) whose mutated length prefix
#: claims 30 billion array elements; found by the fuzzer above. kio 0.6.5's native decoder tries
#: to allocate ~242 GB for it and aborts the process, so consumer/_wire/guard.py checks every
#: length against the bytes left before kio sees a frame.
KIO_ABORT_FRAME = (
    "000000070000020c9d00800f37c2b5c2b41dc285c2a6f382ae9d07f09b8980c3ad0001e2c800003e"
    "c2b68fdbd7f1703a9d01010000"
)


def test_a_huge_length_prefix_is_a_protocol_error_not_a_process_abort() -> None:
    """Decoding the fuzzer's frame must end in one of our typed errors, in a process that
    survives (run in a child, since the abort cannot be caught in Python)."""
    script = (
        "import sys\n"
        "from kio.schema.consumer_group_heartbeat.v0.response import "
        "ConsumerGroupHeartbeatResponse\n"
        "from consumer._wire import decode_response_frame\n"
        "from consumer.errors import ConsumerError\n"
        f"frame = bytes.fromhex({KIO_ABORT_FRAME!r})\n"
        "try:\n"
        "    decode_response_frame(frame, ConsumerGroupHeartbeatResponse)\n"
        "except ConsumerError:\n"
        "    sys.exit(0)\n"
        "sys.exit(3)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr.strip()[-300:]}"


@pytest.mark.parametrize(("key", "response_type"), RESPONSE_TYPES, ids=IDS)
@settings(FUZZ, max_examples=25)
@given(data=st.data())
def test_parsers_take_any_decodable_response(
    key: ApiKey, response_type: type[ResponsePayload], data: st.DataObject
) -> None:
    """Odd but well-formed content (any error code, negative numbers, empty or huge arrays)."""
    only_typed_errors(lambda: PARSERS[key](data.draw(st.from_type(response_type))))


@FUZZ
@given(
    frames=st.lists(st.binary(max_size=200), max_size=8),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
)
def test_frame_decoder_reassembles_any_split(frames: list[bytes], cuts: list[int]) -> None:
    """Valid frames split at arbitrary points come out whole and in order."""
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    points = sorted({c for c in cuts if c < len(stream)} | {0, len(stream)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for start, end in zip(points, points[1:], strict=False):
        out += decoder.feed(stream[start:end])
    assert out == frames
    assert decoder.buffered_bytes == 0


@FUZZ
@given(chunks=st.lists(st.binary(max_size=64), max_size=10), limit=st.integers(0, 1 << 20))
def test_frame_decoder_takes_random_bytes(chunks: list[bytes], limit: int) -> None:
    """Random bytes: frames or a ProtocolError (bad size prefix), never anything else."""
    decoder = FrameDecoder(max_frame_bytes=limit)
    for chunk in chunks:
        if only_typed_errors(lambda chunk=chunk: decoder.feed(chunk)) is None:
            return


# ----------------------------------------------------------------------------------------------
# BrokerConnection against a server that answers with mutated bytes


class MutatingBroker:
    """A tiny Kafka-ish server on 127.0.0.1: answers ApiVersions correctly (so sessions open)
    and answers every Metadata request with a mutated (or truncated, or garbage) frame."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.sessions = 0
        self.metadata_requests = 0
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.sessions += 1
        self._writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, request = decode_request_frame(await reader.readexactly(size))
                correlation_id = int(header.correlation_id)
                if int(request.__api_key__) == ApiKey.API_VERSIONS:
                    writer.write(self._api_versions(int(request.__version__), correlation_id))
                else:
                    self.metadata_requests += 1
                    writer.write(self._mutated_metadata(request, correlation_id))
                await writer.drain()

    def _api_versions(self, version: int, correlation_id: int) -> bytes:
        schema = load_payload_module(18, version, EntityType.response)
        entries = tuple(
            schema.ApiVersion(api_key=i16(k), min_version=i16(low), max_version=i16(high))
            for k, (low, high) in ADVERTISED.items()
        )
        extra = {} if version == 0 else {"throttle_time": i32_timedelta_from_ms(0)}
        response = schema.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=entries, **extra)
        return encode_response_frame(response, correlation_id=correlation_id)

    def _mutated_metadata(self, request: Any, correlation_id: int) -> bytes:
        response_type = response_type_for(type(request))
        response = response_type(
            throttle_time=i32_timedelta_from_ms(0),
            brokers=(),
            cluster_id="c",
            controller_id=BrokerId(1),
            topics=(),
        )  # fmt: skip
        frame = encode_response_frame(response, correlation_id=correlation_id)
        rng = self.random
        body = bytearray(frame[8:])  # keep the size prefix and correlation id: the answer arrives
        choice = rng.choice(["flip", "truncate", "garbage", "extra"])
        if choice == "flip" and body:
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] ^= rng.randint(1, 255)
        elif choice == "truncate":
            del body[rng.randrange(len(body) + 1) :]
        elif choice == "garbage":
            body = bytearray(rng.randbytes(rng.randint(0, 40)))
        else:
            body += rng.randbytes(rng.randint(1, 10))
        payload = frame[4:8] + bytes(body)
        return struct.pack(">i", len(payload)) + payload


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(6))
async def test_connection_drops_and_reconnects_after_mutated_answers(seed: int) -> None:
    broker = MutatingBroker(seed)
    port = await broker.start()
    connection = BrokerConnection(
        "127.0.0.1",
        port,
        request_timeout_ms=2_000,
        retry_policy=RetryPolicy(max_attempts=3, max_elapsed_ms=3_000),
        required_apis=(),
    )
    try:
        for attempt in range(1, 6):
            version = connection.api_version(ApiKey.METADATA) if attempt > 1 else None
            if version is None:
                await asyncio.wait_for(connection.connect(), 5)
                version = connection.api_version(ApiKey.METADATA)
            request = build_metadata_request(version, ["t"])
            # A typed failure is the point; a hang would end in a TimeoutError here.
            with contextlib.suppress(ConsumerError):
                await asyncio.wait_for(connection.request(request), 5)
            if not connection.is_connected:
                await asyncio.wait_for(connection.connect(), 5)
            assert broker.metadata_requests == attempt
        # Every answer was broken: each request's connection was dropped and a new one opened
        # (a session survives only an answer that still decoded, e.g. a harmless flip).
        assert broker.sessions >= 2
    finally:
        await connection.close()
        await broker.stop()
