"""The sans-I/O core of a KIP-848 consumer group member.

A :class:`Member` is driven by ``handle(input, now_ms) -> list[Command]`` and
``poll(now_ms) -> (commands, next_deadline_ms)``. It never reads a clock, sleeps, locks or does I/O:
time comes in as ``now_ms`` and effects leave as command objects that the runtime executes.

Inputs (past tense, :mod:`consumer.member.inputs`):
    Subscribed, Unsubscribed, AppPolled, ConsumedOffsetsReported, CommitRequested,
    PollIntervalExpired, CloseRequested, FetchingStopped, RevocationCompleted, CallbackCompleted,
    AssignmentApplied, HeartbeatSucceeded, HeartbeatFailed, HeartbeatTransportFailed,
    CoordinatorChanged, CoordinatorLost, MetadataResolved, CommitCompleted, CommittedOffsetsFetched,
    StartOffsetsListed.

Commands (imperative, :mod:`consumer.member.commands`):
    SendHeartbeat (with a HeartbeatRequest), FindCoordinator, FetchMetadata, CommitOffsets,
    FetchCommittedOffsets, ListStartOffsets, StopFetching, ApplyAssignment, StartFetching,
    InvokeOnRevoke, InvokeOnAssign, InvokeOnLost, ReportError, ReportCommitResult, ShutDown.

States are described in :mod:`consumer.member.states`; every transition is a row of the rules
table in :mod:`consumer.member.rules`; the heartbeat error table is in
:mod:`consumer.member.errors_table`.
"""

from consumer.member.assignment import AssignmentManager
from consumer.member.commands import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ApplyAssignment,
    Command,
    CommitOffsets,
    CommitReason,
    FetchCommittedOffsets,
    FetchMetadata,
    FindCoordinator,
    HeartbeatRequest,
    InvokeOnAssign,
    InvokeOnLost,
    InvokeOnRevoke,
    ListStartOffsets,
    ReportCommitResult,
    ReportError,
    ResetPolicy,
    SendHeartbeat,
    ShutDown,
    StartFetching,
    StopFetching,
)
from consumer.member.commit import CommitRequestManager
from consumer.member.config import MemberConfig
from consumer.member.errors import (
    FatalMemberError,
    MemberConfigError,
    MemberError,
    MemberStateError,
)
from consumer.member.errors_table import (
    HEARTBEAT_ERROR_ACTIONS,
    ErrorCode,
    HeartbeatErrorAction,
    heartbeat_error_action,
)
from consumer.member.heartbeat import HeartbeatRequestManager, generate_member_id
from consumer.member.inputs import (
    AppPolled,
    AssignmentApplied,
    CallbackCompleted,
    CloseOption,
    CloseRequested,
    CommitCompleted,
    CommitRequested,
    CommittedOffsetsFetched,
    ConsumedOffsetsReported,
    CoordinatorChanged,
    CoordinatorLost,
    FetchingStopped,
    HeartbeatFailed,
    HeartbeatSucceeded,
    HeartbeatTransportFailed,
    Input,
    MetadataResolved,
    PollIntervalExpired,
    RevocationCompleted,
    StartOffsetsListed,
    Subscribed,
    Unsubscribed,
)
from consumer.member.member import Member
from consumer.member.partitions import TopicIdPartition, TopicPartition, TopicPartitions
from consumer.member.rules import RULES, Effect, Guard, Outcome
from consumer.member.states import STATES, MemberState

__all__ = [
    "AppPolled",
    "ApplyAssignment",
    "AssignmentApplied",
    "AssignmentManager",
    "CallbackCompleted",
    "CloseOption",
    "CloseRequested",
    "Command",
    "CommitCompleted",
    "CommitOffsets",
    "CommitReason",
    "CommitRequestManager",
    "CommitRequested",
    "CommittedOffsetsFetched",
    "ConsumedOffsetsReported",
    "CoordinatorChanged",
    "CoordinatorLost",
    "Effect",
    "ErrorCode",
    "FatalMemberError",
    "FetchCommittedOffsets",
    "FetchMetadata",
    "FetchingStopped",
    "FindCoordinator",
    "Guard",
    "HEARTBEAT_ERROR_ACTIONS",
    "HeartbeatErrorAction",
    "HeartbeatFailed",
    "HeartbeatRequest",
    "HeartbeatRequestManager",
    "HeartbeatSucceeded",
    "HeartbeatTransportFailed",
    "Input",
    "InvokeOnAssign",
    "InvokeOnLost",
    "InvokeOnRevoke",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "ListStartOffsets",
    "Member",
    "MemberConfig",
    "MemberConfigError",
    "MemberError",
    "MemberState",
    "MemberStateError",
    "MetadataResolved",
    "Outcome",
    "PollIntervalExpired",
    "RULES",
    "ReportCommitResult",
    "ReportError",
    "ResetPolicy",
    "RevocationCompleted",
    "STATES",
    "STATIC_LEAVE_EPOCH",
    "SendHeartbeat",
    "ShutDown",
    "StartFetching",
    "StartOffsetsListed",
    "StopFetching",
    "Subscribed",
    "TopicIdPartition",
    "TopicPartition",
    "TopicPartitions",
    "Unsubscribed",
    "generate_member_id",
    "heartbeat_error_action",
]
