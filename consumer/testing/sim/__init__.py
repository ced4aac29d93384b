"""Fakes and simulation: no sockets, no processes, no JVM, no wall clock.

Everything here runs in the test's own thread under a :class:`ManualClock`, so a seed gives the same
run every time.
"""

from consumer.testing.sim.autopilot import Autopilot, answer_pending
from consumer.testing.sim.case_studies import CASE_STUDIES, CaseStudy, case_study
from consumer.testing.sim.clock import ManualClock
from consumer.testing.sim.cluster import CallbackCall, SimCluster
from consumer.testing.sim.coordinator import CoordinatorSim, HeartbeatResponse
from consumer.testing.sim.fake_consumer import FakeConsumer
from consumer.testing.sim.group import GroupSim, SimResult, SimulationError
from consumer.testing.sim.harness import Exchange, GroupHarness, HarnessError, MemberDriver
from consumer.testing.sim.steps import Step
from consumer.testing.sim.verdict import verdict

__all__ = [
    "Autopilot",
    "CoordinatorSim",
    "Exchange",
    "GroupHarness",
    "HarnessError",
    "HeartbeatResponse",
    "ManualClock",
    "MemberDriver",
    "answer_pending",
    "CallbackCall",
    "FakeConsumer",
    "SimCluster",
    "GroupSim",
    "SimResult",
    "SimulationError",
    "Step",
    "verdict",
    "CASE_STUDIES",
    "CaseStudy",
    "case_study",
]
