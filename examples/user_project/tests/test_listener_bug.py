"""The rebalance listener, tested in a simulated group: no broker, simulated time, milliseconds.

``check_no_record_processed_twice`` runs two members of the service with the listener under
test: the first one processes records alone, a second one joins (the first one must hand half
of its partitions over), and more records arrive. The invariant checker then reports any record
processed twice without a crash to excuse it. The buggy listener fails it; the fixed one passes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from listeners import BuggyOffsetsListener, OffsetsListener

from consumer.testing import GroupSim, SimResult
from consumer.testing.sim.steps import join, produce, until_stable, wait

TOPIC = "orders"


def run_group(listener: Callable[[], object], seed: int = 0) -> SimResult:
    """Two members of the service and a rebalance, in simulated time."""
    sim = GroupSim({TOPIC: 4}, seed=seed, listener=listener, config={"enable.auto.commit": False})
    return sim.run(
        [
            join("a"),
            produce(TOPIC, "order", count=25),
            until_stable(),
            wait(5_000),  # a processes the 25 orders (and commits after 10 and 20 of them)
            join("b"),  # a must revoke two partitions for b
            until_stable(),
            produce(TOPIC, "order", count=25),
            wait(5_000),
        ]
    )


def check_no_record_processed_twice(listener: Callable[[], object]) -> None:
    """Fails (AssertionError naming each duplicate) if a rebalance makes records processed twice."""
    result = run_group(listener)
    result.report.raise_for_violations()
    assert result.report.records_processed == 50


def test_no_record_is_processed_twice_across_a_rebalance() -> None:
    check_no_record_processed_twice(OffsetsListener)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="the bug this test exists to catch")
def test_the_buggy_listener_is_caught() -> None:
    check_no_record_processed_twice(BuggyOffsetsListener)
