"""Value types held by ``ConsumerConfig``: a masked secret, a broker address, the data plane."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, final

from consumer._config.spec import is_secret_key

MASK = "***"


@final
@dataclass(frozen=True)
class Secret:
    """A password or other secret: ``repr()``/``str()`` show ``'***'``; ``reveal()`` gives it."""

    _value: str = field(repr=False)

    def reveal(self) -> str:
        """The secret itself, for the code that authenticates."""
        return self._value

    def __repr__(self) -> str:
        return repr(MASK)

    def __str__(self) -> str:
        return MASK


class BrokerAddress(NamedTuple):
    """One entry of ``bootstrap.servers``."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@final
class DataPlaneSettings(Mapping[str, object]):
    """The read-only config dict for the librdkafka data-plane consumer.

    Pass ``dict(settings)`` to ``confluent_kafka.Consumer``. Its ``repr()`` masks secret values,
    which the dict itself must hold in clear for librdkafka.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, object]) -> None:
        self._items: dict[str, object] = dict(items)

    def __getitem__(self, key: str) -> object:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset((k, _hashable(v)) for k, v in self._items.items()))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k!r}: {MASK!r}" if is_secret_key(k) else f"{k!r}: {v!r}"
            for k, v in self._items.items()
        )
        return f"DataPlaneSettings({{{shown}}})"


def _hashable(value: object) -> object:
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value
