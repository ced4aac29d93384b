"""The batching parameters of share fetches, from the consumer's configuration. Sans-I/O.

As in the Java 4.3 client: ``max.poll.records`` is sent both as ``MaxRecords`` and
``BatchSize`` and bounds what one ``poll`` hands out, ``fetch.max.wait.ms`` (default 500 ms,
short on purpose: a long poll blocks the session's acknowledgements) is ``MaxWaitMs``,
``fetch.min.bytes`` is ``MinBytes``, ``fetch.max.bytes`` is ``MaxBytes`` and
``share.acquire.mode`` (``batch_optimized`` or ``record_limit``, ShareFetch v2) is
``ShareAcquireMode``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

__all__ = ["AcquireMode", "ShareFetchParameters", "split_for_polls"]

T = TypeVar("T")

_INT32_MAX: Final = 2**31 - 1


class AcquireMode(enum.IntEnum):
    """``ShareAcquireMode``: may a fetch exceed ``max.poll.records`` to keep batches whole?"""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


_MODES: Final = {
    "batch_optimized": AcquireMode.BATCH_OPTIMIZED,
    "record_limit": AcquireMode.RECORD_LIMIT,
}
#: Config key -> (attribute, default, smallest allowed).
_INT_KEYS: Final = {
    "fetch.max.wait.ms": ("max_wait_ms", 500, 0),
    "fetch.min.bytes": ("min_bytes", 1, 0),
    "fetch.max.bytes": ("max_bytes", 52_428_800, 1),
    "max.poll.records": ("max_records", 500, 1),
}


@dataclass(frozen=True, slots=True)
class ShareFetchParameters:
    """What every ShareFetch of a consumer asks for."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    acquire_mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED

    def __post_init__(self) -> None:
        for key, (name, _, smallest) in _INT_KEYS.items():
            value = getattr(self, name)
            if not smallest <= value <= _INT32_MAX:
                raise ValueError(f"{key} must be between {smallest} and {_INT32_MAX}, got {value}")

    @property
    def batch_size(self) -> int:
        """``BatchSize``: the Java client sends ``max.poll.records`` here too."""
        return self.max_records

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> ShareFetchParameters:
        """Read the keys above from a confluent-style config dict (other keys are ignored).

        Raises:
            ValueError: a value that is not an integer in range, or an unknown acquire mode;
                the message names the key and what is allowed.
        """
        values: dict[str, object] = {}
        for key, (name, _, _) in _INT_KEYS.items():
            if key not in config:
                continue
            raw = config[key]
            try:
                if isinstance(raw, bool):
                    raise TypeError
                values[name] = int(raw)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                raise ValueError(f"{key} must be an integer, got {raw!r}") from None
        if "share.acquire.mode" in config:
            raw_mode = config["share.acquire.mode"]
            mode = _MODES.get(str(raw_mode).lower())
            if mode is None:
                allowed = ", ".join(sorted(_MODES))
                raise ValueError(f"share.acquire.mode must be one of {allowed}, got {raw_mode!r}")
            values["acquire_mode"] = mode
        return cls(**values)  # type: ignore[arg-type]


def split_for_polls(delivered: Sequence[T], max_records: int) -> list[Sequence[T]]:
    """Cut fetched records into ``poll``-sized slices of at most ``max_records``."""
    if max_records < 1:
        raise ValueError(f"max.poll.records must be >= 1, got {max_records}")
    return [
        delivered[start : start + max_records] for start in range(0, len(delivered), max_records)
    ]
