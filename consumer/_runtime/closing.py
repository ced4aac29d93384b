"""The ``async with`` protocol shared by the runtime's network resources."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncClosing"]


class AsyncClosing:
    """``async with resource:`` opens it (:meth:`_open`) and closes it (:meth:`close`)."""

    async def _open(self) -> object:
        """Make the resource usable (subclasses: connect, bootstrap, ...)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release the resource for good; idempotent."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
