"""A bounds check of a frame against its kio schema, before kio's native decoder sees it.

kio 0.6.5 decodes with native code that sizes arrays from their length prefix before reading
them: a corrupt or hostile frame claiming billions of elements makes it try to allocate hundreds
of gigabytes, and the allocation failure aborts the whole process (no Python exception). This
module walks the same schema kio uses (field order, ``kafka_type``, flexible versions, tagged
fields, nullable structs) without building anything, and raises ``ProtocolError`` as soon as a
length or count exceeds the bytes left. Only frames that pass reach the native decoder.

It checks sizes, not values: everything else (unknown error codes, bad UTF-8, ...) is still
kio's to find, and comes back as the typed errors of ``framing``.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, Final

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from consumer.errors import ProtocolError

__all__ = ["check_entity_bounds"]

#: Encoded sizes of fixed-width kio types.
_FIXED_SIZES: Final = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


class _Cursor:
    __slots__ = ("data", "end", "position")

    def __init__(self, data: bytes, position: int, end: int) -> None:
        self.data = data
        self.position = position
        self.end = end

    def need(self, size: int, what: str) -> None:
        if size < 0 or size > self.end - self.position:
            raise ProtocolError(
                f"{what} claims {size} bytes but only {self.end - self.position} are left"
            )

    def skip(self, size: int, what: str) -> None:
        self.need(size, what)
        self.position += size

    def uvarint(self, what: str) -> int:
        value, shift = 0, 0
        while True:
            self.need(1, what)
            byte = self.data[self.position]
            self.position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise ProtocolError(f"{what}: unsigned varint longer than 5 bytes")

    def int16(self, what: str) -> int:
        self.need(2, what)
        (value,) = _INT16.unpack_from(self.data, self.position)
        self.position += 2
        return int(value)

    def int32(self, what: str) -> int:
        self.need(4, what)
        (value,) = _INT32.unpack_from(self.data, self.position)
        self.position += 4
        return int(value)

    def count(self, flexible: bool, what: str) -> int:
        """An array or nullable-struct-sized count (-1 for null)."""
        return self.uvarint(what) - 1 if flexible else self.int32(what)


_Entry = tuple[str, Any, str | None, bool]


_LAYOUTS: dict[type[Any], tuple[list[_Entry], dict[int, _Entry]]] = {}


def _layout(entity_type: type[Any]) -> tuple[list[_Entry], dict[int, _Entry]]:
    """Untagged fields in order, tagged ones by tag: (name, class, kafka_type, nullable)."""
    cached = _LAYOUTS.get(entity_type)
    if cached is not None:
        return cached
    untagged: list[_Entry] = []
    tagged: dict[int, _Entry] = {}
    for field in dataclasses.fields(entity_type):
        kind = classify_field(field)
        kafka_type = (
            get_schema_field_type(field)
            if isinstance(kind, PrimitiveField | PrimitiveTupleField)
            else None
        )
        entry = (field.name, kind, kafka_type, is_optional(field))
        tag = get_field_tag(field)
        if tag is None:
            untagged.append(entry)
        else:
            tagged[int(tag)] = entry
    _LAYOUTS[entity_type] = (untagged, tagged)
    return untagged, tagged


def check_entity_bounds(entity_type: type[Any], data: bytes, offset: int = 0) -> int:
    """Walk ``data[offset:]`` as ``entity_type``; return the end offset or raise ProtocolError."""
    cursor = _Cursor(data, offset, len(data))
    _entity(cursor, entity_type, entity_type.__name__)
    return cursor.position


def _entity(cursor: _Cursor, entity_type: type[Any], path: str) -> None:
    flexible = bool(entity_type.__flexible__)
    untagged, tagged = _layout(entity_type)
    # A request header's client_id keeps the classic encoding even in flexible header v2.
    classic_client_id = entity_type.__name__ == "RequestHeader"
    for name, kind, kafka_type, nullable in untagged:
        field_flexible = flexible and not (classic_client_id and name == "client_id")
        _value(cursor, kind, kafka_type, nullable, field_flexible, f"{path}.{name}")
    if not flexible:
        return
    for _ in range(cursor.uvarint(f"{path} tagged-field count")):
        tag = cursor.uvarint(f"{path} tag")
        size = cursor.uvarint(f"{path} tag {tag} size")
        cursor.need(size, f"{path} tag {tag}")
        end = cursor.position + size
        known = tagged.get(tag)
        if known is not None:
            name, kind, kafka_type, nullable = known
            inner = _Cursor(cursor.data, cursor.position, end)
            _value(inner, kind, kafka_type, nullable, flexible, f"{path}.{name}")
        cursor.position = end


def _value(
    cursor: _Cursor, kind: Any, kafka_type: str | None, nullable: bool, flexible: bool, path: str
) -> None:
    if isinstance(kind, EntityField):
        # Nullable structs carry an int8 marker (-1 null, KIP-893); others are inline.
        if nullable:
            cursor.need(1, f"{path} null marker")
            marker = cursor.data[cursor.position]
            cursor.position += 1
            if marker == 0xFF:
                return
        _entity(cursor, kind.type_, path)
        return
    if isinstance(kind, EntityTupleField | PrimitiveTupleField):
        count = cursor.count(flexible, f"{path} array length")
        if count < 0:
            return
        # Every element takes at least one byte: a longer count cannot be honest.
        cursor.need(count, f"{path} array of {count} elements")
        for index in range(count):
            if isinstance(kind, EntityTupleField):
                _entity(cursor, kind.type_, f"{path}[{index}]")
            else:
                _primitive(cursor, kafka_type, flexible, f"{path}[{index}]")
        return
    _primitive(cursor, kafka_type, flexible, path)


def _primitive(cursor: _Cursor, kafka_type: str | None, flexible: bool, path: str) -> None:
    if kafka_type is None:
        raise ProtocolError(f"{path}: no kafka_type in the schema")
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        cursor.skip(size, path)
        return
    if kafka_type == "string":
        length = cursor.uvarint(path) - 1 if flexible else cursor.int16(path)
    elif kafka_type in ("bytes", "records"):
        length = cursor.uvarint(path) - 1 if flexible else cursor.int32(path)
    else:
        raise ProtocolError(f"{path}: kafka_type {kafka_type!r} is not known to the guard")
    if length >= 0:
        cursor.skip(length, path)
