"""Test support shared by every tier (import as ``tests.support``; pytest puts the repository
root on ``sys.path``, and child processes get it in ``PYTHONPATH``).

:func:`wait_until` is the one way a test waits for something that nothing announces: it polls a
condition, often, until it holds or a bound runs out, and then fails with a message that says
what was awaited (and, through ``details``, what was seen instead). :func:`holds_for` is its
dual: a condition that must keep holding for a while.

Which consumer implementation a test drives is chosen by the environment, never by a conftest
(:func:`selected_impl`, :func:`build_consumer`): ``KGM_CONSUMER_IMPL=confluent`` gives
``confluent_kafka.Consumer({**config, "group.protocol": "consumer"})``, librdkafka's own KIP-848
member; anything else (the default, and what CI runs) gives ``consumer.Consumer(config)``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CONFLUENT",
    "IMPL_ENV_VAR",
    "OURS",
    "OURS_CLASSIC",
    "POLL_INTERVAL_S",
    "build_consumer",
    "holds_for",
    "selected_impl",
    "wait_until",
]

IMPL_ENV_VAR = "KGM_CONSUMER_IMPL"
CONFLUENT = "confluent"
OURS = "ours"
#: ``consumer.Consumer`` with ``group.protocol=classic`` (librdkafka's classic member behind our
#: facade): chosen by tests of protocol-independent behaviour, never by the environment.
OURS_CLASSIC = "ours-classic"

#: How often a condition is re-checked unless the caller asks otherwise.
POLL_INTERVAL_S = 0.05


def wait_until(
    predicate: Callable[[], object],
    timeout_s: float,
    what: str,
    details: Callable[[], str] | None = None,
    *,
    interval_s: float = POLL_INTERVAL_S,
) -> float:
    """Poll ``predicate`` every ``interval_s`` until it is truthy; return the seconds it took.

    After ``timeout_s`` it raises ``AssertionError`` naming ``what`` (and adding ``details()``,
    called only then). A larger ``interval_s`` suits conditions whose every check is a request
    to the broker or a Spark job.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{extra}")
        time.sleep(interval_s)
    return time.monotonic() - start


def holds_for(
    predicate: Callable[[], object],
    duration_s: float,
    what: str,
    details: Callable[[], str] | None = None,
    *,
    interval_s: float = 0.1,
) -> None:
    """Assert that ``predicate`` stays truthy for the whole of ``duration_s`` (checked often)."""
    start = time.monotonic()
    while True:
        if not predicate():
            extra = f"\n{details()}" if details is not None else ""
            elapsed = time.monotonic() - start
            raise AssertionError(f"{what} stopped holding after {elapsed:.1f}s{extra}")
        if time.monotonic() - start >= duration_s:
            return
        time.sleep(interval_s)


def selected_impl() -> str:
    """``"confluent"`` when ``KGM_CONSUMER_IMPL=confluent``, else ``"ours"``."""
    return CONFLUENT if os.environ.get(IMPL_ENV_VAR, "").strip().lower() == CONFLUENT else OURS


def build_consumer(config: Mapping[str, Any], impl: str | None = None) -> Any:
    """A consumer of implementation ``impl`` (default: :func:`selected_impl`) for ``config``."""
    chosen = impl or selected_impl()
    if chosen == CONFLUENT:
        from confluent_kafka import Consumer as ConfluentConsumer

        return ConfluentConsumer({**config, "group.protocol": "consumer"})
    if chosen not in (OURS, OURS_CLASSIC):
        raise ValueError(f"unknown consumer implementation {chosen!r}")
    from consumer import Consumer  # lands with the facade (issue #4)

    if chosen == OURS_CLASSIC:
        return Consumer({**config, "group.protocol": "classic"})
    return Consumer(dict(config))


def register_kio_strategies() -> None:
    """Teach Hypothesis the kio types it cannot derive: a ``records`` field (ShareFetch) holds
    raw record batches, so any bytes will do. Called by the root conftest and by the fuzzers'
    child processes (which load no conftest)."""
    from hypothesis import strategies as st
    from kio.static.primitive import Records

    st.register_type_strategy(Records, st.binary(max_size=256).map(Records))
