"""The guard's compiled walk accepts exactly the frames its field-by-field walk accepts.

``check_entity_bounds`` walks a frame with a compiled plan per entity type and falls back to
the field-by-field walk (which names the field it refuses) only when the plan refuses. These
tests hold the two walks to the same answer, end offset included, on valid frames of every
response type we decode and on those frames truncated or mutated (``test_guard`` checks that a
refused frame's error still names the field).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records
from kio.static.protocol import ResponsePayload

from consumer._wire import SUPPORTED_VERSIONS, encode_response_frame
from consumer._wire.framing import request_type_for, response_type_for
from consumer._wire.guard import _Cursor, _entity, _plan, _Refused
from consumer.errors import ProtocolError

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

RESPONSE_TYPES: list[type[ResponsePayload]] = [
    response_type_for(request_type_for(int(key), version))
    for key, versions in SUPPORTED_VERSIONS.items()
    for version in range(versions.min_version, versions.max_version + 1)
]


def field_by_field(entity_type: type[Any], frame: bytes, offset: int) -> int | None:
    """The field-by-field walk's end offset, or None when it refuses the frame."""
    cursor = _Cursor(frame, offset, len(frame))
    try:
        _entity(cursor, entity_type, entity_type.__name__)
    except ProtocolError:
        return None
    return cursor.position


def compiled(entity_type: type[Any], frame: bytes, offset: int) -> int | None:
    """The compiled walk's end offset, or None when it refuses the frame."""
    try:
        return _plan(entity_type)(frame, offset, len(frame))
    except _Refused:
        return None


def assert_same_answer(response_type: type[ResponsePayload], frame: bytes) -> None:
    header_type = response_type.__header_schema__
    header_end = field_by_field(header_type, frame, 0)
    assert compiled(header_type, frame, 0) == header_end
    if header_end is not None:
        expected = field_by_field(response_type, frame, header_end)
        assert compiled(response_type, frame, header_end) == expected, frame.hex()


@st.composite
def damaged(draw: st.DrawFn, frame: bytes) -> bytes:
    """``frame`` truncated, or with bytes flipped, inserted or overwritten by extreme values."""
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["truncate", "flip", "insert", "int"]))
        if op == "truncate":
            del data[at:]
        elif op == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        else:
            value = draw(st.sampled_from([-1, 0, 1, 2**31 - 1, -(2**31), 0x7FFF]))
            data[at : at + 4] = struct.pack(">i", value)
    return bytes(data)


@pytest.mark.parametrize(
    "response_type", RESPONSE_TYPES, ids=[f"{t.__name__}-v{t.__version__}" for t in RESPONSE_TYPES]
)
@settings(
    max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_both_walks_give_the_same_answer(
    response_type: type[ResponsePayload], data: st.DataObject
) -> None:
    frame = encode_response_frame(data.draw(st.from_type(response_type)), correlation_id=3)[4:]
    assert_same_answer(response_type, frame)
    assert_same_answer(response_type, data.draw(damaged(frame)))
