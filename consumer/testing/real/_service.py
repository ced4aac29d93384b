"""The start/stop life cycle shared by the local broker and the fault proxies."""

from __future__ import annotations

import abc
from typing import Self

__all__ = ["Service"]


class Service(abc.ABC):
    """Something started with :meth:`start` and stopped with :meth:`stop`.

    As a context manager it is started on entry (``with LocalBroker() as broker:``) and stopped
    on exit, whatever the exit.
    """

    @abc.abstractmethod
    def start(self) -> Self:
        """Start; returns ``self``, ready to use."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop and release what :meth:`start` took (safe to call more than once)."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
