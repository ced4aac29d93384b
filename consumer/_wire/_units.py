"""Conversions between our integer milliseconds and kio's timedelta fields."""

from __future__ import annotations

import datetime

from kio.static.primitive import i32Timedelta

__all__ = ["i32_timedelta_from_ms", "ms_from_timedelta"]

_ONE_MS = datetime.timedelta(milliseconds=1)


def i32_timedelta_from_ms(milliseconds: int) -> i32Timedelta:
    """A kio int32 duration field from milliseconds (-1 and other sentinels included)."""
    return i32Timedelta.parse(datetime.timedelta(milliseconds=milliseconds))


def ms_from_timedelta(duration: datetime.timedelta) -> int:
    """Whole milliseconds of a kio duration field."""
    return duration // _ONE_MS
