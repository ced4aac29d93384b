"""Fakes and simulation: no sockets, no processes, no JVM, no wall clock.

Everything here runs in the test's own thread under a :class:`ManualClock`, so a seed gives the same
run every time.
"""

from consumer.testing.sim.autopilot import Autopilot, answer_pending
from consumer.testing.sim.case_studies import CASE_STUDIES, CaseStudy, case_study
from consumer.testing.sim.checks import verdict
from consumer.testing.sim.clock import ManualClock
from consumer.testing.sim.cluster import CallbackCall, SimCluster
from consumer.testing.sim.coordinator import CoordinatorSim, HeartbeatResponse
from consumer.testing.sim.fake_consumer import FakeConsumer
from consumer.testing.sim.fake_share_consumer import (
    AcknowledgementCommitCallback,
    FakeShareConsumer,
)
from consumer.testing.sim.group import GroupSim, SimResult, SimulationError
from consumer.testing.sim.harness import Exchange, GroupHarness, HarnessError, MemberDriver
from consumer.testing.sim.share_assignor import simple_share_assignment
from consumer.testing.sim.share_cluster import ShareSimCluster
from consumer.testing.sim.share_coordinator import ShareCoordinatorSim, ShareHeartbeatReply
from consumer.testing.sim.share_partitions import (
    RecordState,
    ShareGroupSettings,
    SharePartitionSim,
    SharePartitionsSim,
)
from consumer.testing.sim.steps import (
    Step,
    add_partitions,
    commit_fails,
    coordinator_moved,
    crash,
    fence,
    join,
    leave,
    network_cut,
    produce,
    stall,
    until_stable,
    wait,
)

__all__ = [
    "AcknowledgementCommitCallback",
    "Autopilot",
    "FakeShareConsumer",
    "RecordState",
    "ShareCoordinatorSim",
    "ShareGroupSettings",
    "ShareHeartbeatReply",
    "SharePartitionSim",
    "SharePartitionsSim",
    "ShareSimCluster",
    "simple_share_assignment",
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
    "wait",
    "until_stable",
    "stall",
    "produce",
    "network_cut",
    "leave",
    "join",
    "fence",
    "crash",
    "coordinator_moved",
    "commit_fails",
    "add_partitions",
]
