"""The wire layer: kio messages <-> bytes, version negotiation. Sans-I/O, no sockets.

This is the only package that knows Kafka API versions. Builders take our own small frozen
dataclasses (or plain arguments) plus a version and return kio request objects; parsers take kio
response objects and return our typed results, with broker error codes already turned into
:mod:`consumer.errors` exceptions.
"""

from .api_versions import (
    CLIENT_SOFTWARE_NAME,
    build_api_versions_request,
    decode_api_versions_frame,
    parse_api_versions_response,
    retry_version_after_unsupported,
)
from .coordinator import (
    CoordinatorKeyType,
    CoordinatorLocation,
    build_find_coordinator_request,
    build_find_coordinator_requests,
    parse_find_coordinator_response,
)
from .framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    decode_request_frame,
    decode_response_frame,
    encode_request_frame,
    encode_response_frame,
    peek_correlation_id,
    request_type_for,
    response_type_for,
)
from .group_describe import (
    DescribedGroup,
    DescribedMember,
    build_consumer_group_describe_request,
    parse_consumer_group_describe_response,
)
from .heartbeat import (
    ConsumerGroupHeartbeatRequest,
    HeartbeatContent,
    HeartbeatResult,
    OwnedTopicPartitions,
    build_heartbeat_request,
    parse_heartbeat_response,
)
from .metadata import (
    BrokerAddress,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    build_metadata_request,
    parse_metadata_response,
)
from .offsets import (
    CommittedOffset,
    OffsetCommitFields,
    OffsetFetchFields,
    OffsetFetchResult,
    OffsetToCommit,
    PartitionCommitResult,
    TopicPartition,
    build_offset_commit_request,
    build_offset_fetch_request,
    offsets_version,
    parse_offset_commit_response,
    parse_offset_fetch_response,
)
from .versions import (
    ALL_GROUP_APIS,
    KIP848_MISSING_MESSAGE,
    SUPPORTED_VERSIONS,
    ApiKey,
    NegotiatedVersions,
    VersionRange,
    api_label,
    negotiate_versions,
)

__all__ = [
    "ALL_GROUP_APIS",
    "CLIENT_SOFTWARE_NAME",
    "DEFAULT_MAX_FRAME_BYTES",
    "KIP848_MISSING_MESSAGE",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "BrokerAddress",
    "ClusterMetadata",
    "CommittedOffset",
    "CoordinatorKeyType",
    "CoordinatorLocation",
    "DescribedGroup",
    "DescribedMember",
    "FrameDecoder",
    "ConsumerGroupHeartbeatRequest",
    "HeartbeatContent",
    "HeartbeatResult",
    "NegotiatedVersions",
    "OffsetCommitFields",
    "OffsetFetchFields",
    "OffsetFetchResult",
    "OffsetToCommit",
    "OwnedTopicPartitions",
    "PartitionCommitResult",
    "PartitionMetadata",
    "TopicMetadata",
    "TopicPartition",
    "VersionRange",
    "api_label",
    "build_api_versions_request",
    "build_consumer_group_describe_request",
    "build_find_coordinator_request",
    "build_find_coordinator_requests",
    "build_heartbeat_request",
    "build_metadata_request",
    "build_offset_commit_request",
    "build_offset_fetch_request",
    "decode_api_versions_frame",
    "decode_request_frame",
    "decode_response_frame",
    "encode_request_frame",
    "encode_response_frame",
    "negotiate_versions",
    "offsets_version",
    "parse_api_versions_response",
    "parse_consumer_group_describe_response",
    "parse_find_coordinator_response",
    "parse_heartbeat_response",
    "parse_metadata_response",
    "parse_offset_commit_response",
    "parse_offset_fetch_response",
    "peek_correlation_id",
    "request_type_for",
    "response_type_for",
    "retry_version_after_unsupported",
]
