"""Checking and coercing one configuration value against its ``KeySpec``.

Coercers raise ``InvalidValue`` with what is allowed; ``parse_config`` adds the key and the (masked)
value and raises ``ConfigError``. Rules, stricter than librdkafka's ``strtol`` in one place:

* integers: an ``int`` (not a ``bool``) or a decimal string such as ``"500"`` or ``" -1 "``;
  librdkafka would also read ``"100ms"`` as 100 and ``1.5`` as 1, which we refuse;
* booleans: ``True``/``False`` or the strings ``"true"``/``"false"`` in any case;
* enums and CSV flags: case-insensitive, stored in their canonical spelling.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from consumer._config.spec import KeySpec, Kind, is_secret_key
from consumer._config.types import MASK, BrokerAddress

DEFAULT_BROKER_PORT = 9092
_INT_RE = re.compile(r"[+-]?[0-9]+")
_HOST_RE = re.compile(r"[A-Za-z0-9._-]+")
_INSTANCE_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")


class InvalidValue(Exception):
    """A value does not fit its key; ``allowed`` says what would."""

    def __init__(self, allowed: str) -> None:
        super().__init__(allowed)
        self.allowed = allowed


def show_value(key: str, value: object) -> str:
    """How a given value appears in messages: ``'***'`` for secrets, a short repr otherwise."""
    if is_secret_key(key):
        return repr(MASK)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_allowed(spec: KeySpec) -> str:
    """What a key accepts, in words (used in error messages and the docs table)."""
    if spec.kind is Kind.INT:
        return f"an integer in {spec.min_value}..{spec.max_value}"
    if spec.kind is Kind.BOOL:
        return "True/False or 'true'/'false'"
    if spec.kind is Kind.ENUM:
        names = list(spec.choices) + [alias for alias, _ in spec.synonyms]
        return "one of " + ", ".join(repr(n) for n in names) + " (case-insensitive)"
    if spec.kind is Kind.CSV_FLAGS:
        return "a comma-separated list of " + ", ".join(spec.choices)
    if spec.kind is Kind.BROKER_LIST:
        return "a comma-separated list of host:port (IPv6 as [addr]:port)"
    if spec.kind is Kind.CALLABLE:
        return "a callable"
    if spec.kind is Kind.LOGGER:
        return "a logging.Logger or logging.LoggerAdapter"
    return "a non-empty string"


def coerce(spec: KeySpec, value: object) -> object:
    """The typed value of ``value`` for ``spec``, or ``InvalidValue``."""
    allowed = describe_allowed(spec)
    if spec.kind is Kind.INT:
        return _to_int(value, spec, allowed)
    if spec.kind is Kind.BOOL:
        return _to_bool(value, allowed)
    if spec.kind is Kind.ENUM:
        return _to_enum(value, spec, allowed)
    if spec.kind is Kind.CSV_FLAGS:
        return _to_csv_flags(value, spec, allowed)
    if spec.kind is Kind.BROKER_LIST:
        return parse_broker_list(value)
    if spec.kind is Kind.CALLABLE:
        return _to_callable(value, allowed)
    if spec.kind is Kind.LOGGER:
        if isinstance(value, logging.Logger | logging.LoggerAdapter):
            return value
        raise InvalidValue(allowed)
    return _to_str(value, allowed)


def _to_int(value: object, spec: KeySpec, allowed: str) -> int:
    if isinstance(value, bool):
        raise InvalidValue(allowed)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        raise InvalidValue(allowed)
    lo, hi = spec.min_value, spec.max_value
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise InvalidValue(allowed)
    return number


def _to_bool(value: object, allowed: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
    raise InvalidValue(allowed)


def _to_enum(value: object, spec: KeySpec, allowed: str) -> str:
    if isinstance(value, str):
        lowered = value.strip().lower()
        for choice in spec.choices:
            if choice.lower() == lowered:
                return choice
        for alias, canonical in spec.synonyms:
            if alias == lowered:
                return canonical
    raise InvalidValue(allowed)


def _to_csv_flags(value: object, spec: KeySpec, allowed: str) -> str:
    if not isinstance(value, str):
        raise InvalidValue(allowed)
    flags = [flag.strip().lower() for flag in value.split(",")]
    if not all(flag in spec.choices for flag in flags):
        raise InvalidValue(allowed)
    return ",".join(flags)


def _to_callable(value: object, allowed: str) -> Callable[..., object]:
    if callable(value):
        return value
    raise InvalidValue(allowed)


def _to_str(value: object, allowed: str) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise InvalidValue(allowed)


def check_instance_id(value: str) -> str:
    """``group.instance.id`` as Java's ``JoinGroupRequest.validateGroupInstanceId`` allows it."""
    if _INSTANCE_ID_RE.fullmatch(value) and value not in (".", ".."):
        return value
    raise InvalidValue("at most 249 characters of [a-zA-Z0-9._-], not '.' or '..'")


def parse_broker_list(value: object) -> tuple[BrokerAddress, ...]:
    """``"h1:9092, [::1]:9093, h3"`` -> broker addresses (port 9092 when missing, as librdkafka)."""
    allowed = "a comma-separated list of host:port (IPv6 as [addr]:port)"
    if not isinstance(value, str):
        raise InvalidValue(allowed)
    entries = [entry.strip() for entry in value.split(",")]
    if not any(entries):
        raise InvalidValue(allowed)
    addresses = []
    for entry in entries:
        if not entry:
            continue  # librdkafka skips empty entries such as a trailing comma
        address = _parse_broker(entry)
        if address is None:
            raise InvalidValue(f"{allowed}; {entry!r} is not one")
        addresses.append(address)
    return tuple(addresses)


def _parse_broker(entry: str) -> BrokerAddress | None:
    if "://" in entry:  # librdkafka accepts a listener-style prefix such as PLAINTEXT://
        scheme, _, entry = entry.partition("://")
        if not scheme.replace("_", "").isalnum():
            return None
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if not bracket or not host or ":" not in host:
            return None
        port_text = rest[1:] if rest.startswith(":") else None
        if rest and port_text is None:
            return None
    else:
        host, colon, port_text_or_empty = entry.partition(":")
        port_text = port_text_or_empty if colon else None
        if not _HOST_RE.fullmatch(host):
            return None
    if port_text is None:
        return BrokerAddress(host, DEFAULT_BROKER_PORT)
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        return None
    return BrokerAddress(host, int(port_text))
