"""The ``logger`` configuration key: where one consumer's own log records go.

confluent-kafka sends a client's librdkafka logs to the ``logging.Logger`` given as ``logger``.
The data plane gets that logger as it is; for the member's own records (the background loop, its
connections and retries) each module logs through a :class:`RoutedLogger`. It writes to the
logger bound to the current context by :func:`log_to`, and to its module's logger when none is
bound. The background thread binds its consumer's logger once, before its event loop starts;
asyncio tasks inherit the binding, so several consumers in one process keep their records apart.

Standard library only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import ContextVar

__all__ = ["AnyLogger", "RoutedLogger", "WithoutDebugRecords", "log_to", "routed_logger"]

AnyLogger = logging.Logger | logging.LoggerAdapter[logging.Logger]

_BOUND: ContextVar[AnyLogger | None] = ContextVar("consumer_logger", default=None)


def log_to(logger: AnyLogger | None) -> None:
    """Send the records of every :class:`RoutedLogger` in the current context to ``logger``
    (None: to each module's own logger). Tasks and contexts copied afterwards inherit it."""
    _BOUND.set(logger)


class _ForwardingAdapter(logging.LoggerAdapter[logging.Logger]):
    """A ``LoggerAdapter`` that hands each record to the logger :meth:`destination` names for
    its level (``None``: the record is not written), one stack level up, so the record names
    our caller as its origin."""

    def destination(self, level: int) -> AnyLogger | None:
        """Where a record of ``level`` logged now would go."""
        raise NotImplementedError

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - the logging API's name
        """Whether a record of ``level`` would be written where it would go."""
        target = self.destination(level)
        return target is not None and target.isEnabledFor(level)

    def log(
        self,
        level: int,
        msg: object,
        *args: object,
        exc_info: logging._ExcInfoType = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        """Log to :meth:`destination`'s logger, if any."""
        target = self.destination(level)
        if target is not None:
            target.log(
                level,
                msg,
                *args,
                exc_info=exc_info,
                stack_info=stack_info,
                stacklevel=stacklevel + 1,
                extra=extra,
            )


class RoutedLogger(_ForwardingAdapter):
    """A module's logger that writes to the logger bound by :func:`log_to`, if any.

    It has the whole ``LoggerAdapter`` API (``debug`` ... ``exception``, ``isEnabledFor``); the
    records name the module's caller as their origin, as plain logger calls would.
    """

    def __init__(self, name: str) -> None:
        super().__init__(logging.getLogger(name), None)

    @property
    def target(self) -> AnyLogger:
        """Where a record logged now would go."""
        return _BOUND.get() or self.logger

    def destination(self, level: int) -> AnyLogger:
        """:attr:`target`, whatever the level."""
        return self.target


def routed_logger(name: str) -> RoutedLogger:
    """The :class:`RoutedLogger` of module ``name`` (``logging.getLogger(name)`` by default)."""
    return RoutedLogger(name)


class WithoutDebugRecords(_ForwardingAdapter):
    """The ``logger`` key's logger for records of INFO and above; DEBUG records are not written.

    librdkafka writes debug records to ``logger`` only for the contexts named in its ``debug``
    key, so a program that gives ``logger`` without ``debug`` sees no debug records from
    confluent-kafka; the member's own DEBUG records follow the same rule (``debug`` set: they
    reach ``logger``). They are dropped rather than sent to the ``consumer`` loggers, because a
    program may well name its own logger ``consumer`` (confluent-kafka's example consumer does).
    """

    def __init__(self, logger: AnyLogger) -> None:
        super().__init__(logger if isinstance(logger, logging.Logger) else logger.logger, None)
        self.user_logger = logger

    def destination(self, level: int) -> AnyLogger | None:
        """The user's logger for INFO and above; nowhere for DEBUG."""
        return self.user_logger if level >= logging.INFO else None
