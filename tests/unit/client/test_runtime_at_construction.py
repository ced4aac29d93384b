"""``Consumer(config)`` starts the member's runtime at once (it looks the coordinator up ahead of
``subscribe()``), without waiting for the network: a wrong or silent bootstrap server makes
neither construction nor ``close()`` slow, and the member's task (on the process's shared loop
thread, which ends with its last member) does not outlive ``close()``.

No broker here: what reaches a real one (a lookup, no heartbeat) is
``tests/integration/test_early_coordinator_lookup.py``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from consumer import Consumer
from consumer._runtime.background import _DRAIN_TIMEOUT_S, BackgroundRuntime
from tests.support import wait_until

#: Far below what waiting for the network would take here (a lookup in flight is given the 30 s
#: request timeout; a stopping loop waits up to _DRAIN_TIMEOUT_S for requests it drains).
QUICK_S = 2.0


def member_runtime(consumer: Consumer) -> BackgroundRuntime:
    """The consumer's member runtime (its task on the process's shared loop)."""
    runtime = consumer._runtime  # noqa: SLF001
    assert isinstance(runtime, BackgroundRuntime), "started when the consumer was built"
    return runtime


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A listening socket that never accepts: connections open, requests are never answered."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("address", ["refused", "silent", "unresolvable"])
def test_construction_and_close_without_subscribing_are_quick_and_leave_no_task(
    address: str, silent_server: str
) -> None:
    bootstrap = {
        "refused": "127.0.0.1:1",
        "silent": silent_server,
        "unresolvable": "no-such-host.invalid:9092",
    }[address]
    assert QUICK_S < _DRAIN_TIMEOUT_S
    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "early-runtime"})
    built_s = time.monotonic() - started
    runtime = member_runtime(consumer)
    assert runtime.running, "the runtime starts when the consumer is built"
    assert consumer.state == "UNSUBSCRIBED"
    assert consumer.memberid() is None, "no member id before subscribe(), as before"
    assert consumer.poll(0.1) is None
    started = time.monotonic()
    consumer.close()
    closed_s = time.monotonic() - started
    assert built_s < QUICK_S, f"construction took {built_s:.2f} s"
    assert closed_s < QUICK_S, f"close() took {closed_s:.2f} s: it waited for the lookup"
    assert runtime.finished, "the runtime's task ended with close()"


def test_a_silent_coordinator_lookup_does_not_delay_close_after_subscribe(
    silent_server: str,
) -> None:
    consumer = Consumer({"bootstrap.servers": silent_server, "group.id": "early-runtime"})
    runtime = member_runtime(consumer)
    consumer.subscribe(["t"])
    assert consumer.poll(0.2) is None
    assert consumer.state == "JOINING"
    started = time.monotonic()
    consumer.close(timeout=1.0)
    closed_s = time.monotonic() - started
    assert closed_s < QUICK_S, f"close(timeout=1.0) took {closed_s:.2f} s"
    wait_until(lambda: runtime.finished, QUICK_S, "the runtime's task to end")
