"""Test your Kafka application against this SDK's member: fakes and a simulated group under a manual
clock (:mod:`consumer.testing.sim`, no I/O), real-broker tooling (:mod:`consumer.testing.real`: a
local Kafka broker or three-broker cluster, a fault proxy), and the rebalance timeline with its
invariant checker, shared by both.
"""

from consumer.testing.invariants import CheckReport, Violation, check
from consumer.testing.plotting import plot
from consumer.testing.real import (
    BrokerStartError,
    FaultProxy,
    LocalBroker,
    LocalCluster,
    ProxiedBroker,
    running_broker,
)
from consumer.testing.recorder import TimelineRecorder, record
from consumer.testing.sim import (
    CASE_STUDIES,
    CallbackCall,
    CaseStudy,
    CoordinatorSim,
    FakeConsumer,
    FakeShareConsumer,
    GroupHarness,
    GroupSim,
    ManualClock,
    RecordState,
    ShareSimCluster,
    SimCluster,
    SimResult,
    SimulationError,
    Step,
    case_study,
)
from consumer.testing.timeline import Timeline

__all__ = [
    "BrokerStartError",
    "CASE_STUDIES",
    "CallbackCall",
    "CaseStudy",
    "CheckReport",
    "CoordinatorSim",
    "FakeConsumer",
    "FakeShareConsumer",
    "FaultProxy",
    "GroupHarness",
    "GroupSim",
    "LocalBroker",
    "LocalCluster",
    "ManualClock",
    "ProxiedBroker",
    "RecordState",
    "ShareSimCluster",
    "SimCluster",
    "SimResult",
    "SimulationError",
    "Step",
    "Timeline",
    "TimelineRecorder",
    "Violation",
    "case_study",
    "check",
    "plot",
    "record",
    "running_broker",
]
