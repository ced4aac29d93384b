"""Test your Kafka application against this SDK's member: fakes and a simulated group under a manual
clock (:mod:`consumer.testing.sim`, no I/O), real-broker tooling (:mod:`consumer.testing.real`: a
local Kafka broker, a fault proxy), and the rebalance timeline with its invariant checker, shared by
both.
"""

from consumer.testing.invariants import CheckReport, Violation, check
from consumer.testing.real import (
    BrokerStartError,
    FaultProxy,
    LocalBroker,
    ProxiedBroker,
    running_broker,
)
from consumer.testing.sim import CoordinatorSim, GroupHarness, ManualClock
from consumer.testing.sim.cluster import CallbackCall, SimCluster
from consumer.testing.sim.fake_consumer import FakeConsumer
from consumer.testing.sim.group import GroupSim, SimResult, SimulationError
from consumer.testing.timeline import Timeline

__all__ = [
    "BrokerStartError",
    "CheckReport",
    "CoordinatorSim",
    "FaultProxy",
    "GroupHarness",
    "LocalBroker",
    "ManualClock",
    "ProxiedBroker",
    "Timeline",
    "Violation",
    "check",
    "running_broker",
    "CallbackCall",
    "FakeConsumer",
    "SimCluster",
    "GroupSim",
    "SimResult",
    "SimulationError",
]
