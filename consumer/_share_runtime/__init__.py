"""The background side of :class:`consumer.ShareConsumer`: a thread running an asyncio loop with
the share member core (heartbeats to the coordinator) and the share data plane (one
:class:`~consumer.share.session.ShareSession` fetch loop per partition leader, acknowledgements
piggybacked on fetches, ShareAcknowledge for commits and close)."""

from consumer._share_runtime.events import (
    Acknowledge,
    AcknowledgementsCompleted,
    Close,
    Commit,
    CommitResult,
    FetchedRecord,
    PartitionFailed,
    RecordSource,
    RuntimeFailed,
    SetSaslCredentials,
)
from consumer._share_runtime.loop import ShareRuntime

__all__ = [
    "Acknowledge",
    "AcknowledgementsCompleted",
    "Close",
    "Commit",
    "CommitResult",
    "FetchedRecord",
    "PartitionFailed",
    "RecordSource",
    "RuntimeFailed",
    "SetSaslCredentials",
    "ShareRuntime",
]
