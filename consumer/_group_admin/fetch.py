"""``kgm group``'s reads from the cluster: which request answers what, and from where.

* **Listing** sends ListGroups v5 to every broker (each lists the groups it coordinates, with
  their type) through the SDK's own connections: confluent-kafka 2.16's ``list_consumer_groups``
  leaves share groups out and its ``ConsumerGroupType`` has no share type.
* **Share groups** are described with ShareGroupDescribe and DescribeShareGroupOffsets, also
  ours: confluent-kafka 2.16 has no share-group admin call.
* **KIP-848 consumer groups** are described with the wire layer's ConsumerGroupDescribe:
  ``describe_consumer_groups`` gives members and assignments but no group, assignment or member
  epochs and no rack.
* **Classic groups** are described by confluent-kafka's ``describe_consumer_groups``
  (DescribeGroups, with the member assignments decoded), and committed offsets of consumer and
  classic groups come from its ``list_consumer_group_offsets``: both already return what is
  needed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Final, Self

from kio.static.protocol import RequestPayload

from consumer._runtime.cluster import ClusterClient
from consumer._runtime.retry import RetryPolicy
from consumer._wire import (
    ApiKey,
    ListedGroup,
    NegotiatedVersions,
    build_consumer_group_describe_request,
    build_describe_share_group_offsets_request,
    build_list_groups_request,
    build_share_group_describe_request,
    parse_consumer_group_describe_response,
    parse_describe_share_group_offsets_response,
    parse_list_groups_response,
    parse_share_group_describe_response,
)
from consumer.config import ConfigError, SecurityConfig
from consumer.errors import BrokerError, ConsumerError, GroupIdNotFoundError

from .model import (
    CLASSIC,
    CONSUMER,
    SHARE,
    CommittedOffsetLike,
    GroupDescription,
    GroupListing,
    classic_group_description,
    consumer_group_description,
    share_group_description,
    with_lag,
)

__all__ = ["GroupAdmin", "GroupNotFoundError"]

#: Only METADATA and FIND_COORDINATOR are needed on every connection; the rest is checked per use.
_REQUIRED_APIS: Final = frozenset({ApiKey.METADATA, ApiKey.FIND_COORDINATOR})


class GroupNotFoundError(ConsumerError):
    """The group does not exist (its coordinator does not list it)."""

    def __init__(self, group_id: str, coordinator: str) -> None:
        super().__init__(
            f"group {group_id!r} does not exist (its coordinator {coordinator} has no such group)"
        )
        self.group_id = group_id


class GroupAdmin:
    """Reads groups from one cluster; use as ``async with GroupAdmin(...) as admin``.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        admin_config: librdkafka properties for confluent-kafka's AdminClient (the
            ``--command-config`` file's keys), without ``bootstrap.servers``.
        security: TLS/SASL of the SDK's own connections (the same keys, checked).
        client_id: sent in every request header.
        timeout_ms: bound on each request and on connecting.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        admin_config: Mapping[str, str],
        security: SecurityConfig | None,
        client_id: str,
        timeout_ms: int,
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._admin_config = dict(admin_config)
        self._timeout_ms = timeout_ms
        self._cluster = ClusterClient(
            bootstrap_servers,
            client_id=client_id,
            connect_timeout_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
            connect_retry=RetryPolicy(max_elapsed_ms=timeout_ms),
            required_apis=_REQUIRED_APIS,
            security=security,
        )
        self._admin: Any = None

    async def start(self) -> None:
        """Check the AdminClient's configuration, connect to the first reachable bootstrap
        broker and learn the brokers.

        Raises:
            ConfigError: confluent-kafka refused a ``--command-config`` key.
        """
        self._admin_client()
        await self._cluster.start()

    async def close(self) -> None:
        """Close every connection (the SDK's and confluent-kafka's); idempotent."""
        await self._cluster.close()
        self._admin = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- list ---------------------------------------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        """Every group of the cluster with its type, state and member count, by group id."""
        per_broker = await asyncio.gather(
            *(self._list_on(node_id) for node_id in sorted(self._cluster.brokers))
        )
        listings: list[GroupListing] = []
        classic: list[ListedGroup] = []
        for node_id, listed in zip(sorted(self._cluster.brokers), per_broker, strict=True):
            counts = await self._member_counts(node_id, listed)
            for group in listed:
                if group.group_type == CLASSIC:
                    classic.append(group)
                    continue
                listings.append(_listing(group, counts.get(group.group_id)))
        classic_counts = await self._classic_member_counts([g.group_id for g in classic])
        listings.extend(_listing(g, classic_counts.get(g.group_id)) for g in classic)
        return sorted(listings, key=lambda listing: listing.group)

    async def _list_on(self, node_id: int) -> list[ListedGroup]:
        connection = await self._cluster.connection_to(node_id)
        version = connection.api_version(ApiKey.LIST_GROUPS)
        response = await connection.request(build_list_groups_request(version))
        return parse_list_groups_response(response)

    async def _member_counts(self, node_id: int, listed: Sequence[ListedGroup]) -> dict[str, int]:
        connection = await self._cluster.connection_to(node_id)
        counts: dict[str, int] = {}
        consumer_ids = [g.group_id for g in listed if g.group_type == CONSUMER]
        if consumer_ids:
            version = connection.api_version(ApiKey.CONSUMER_GROUP_DESCRIBE)
            consumer_request = build_consumer_group_describe_request(version, consumer_ids)
            for described in parse_consumer_group_describe_response(
                await connection.request(consumer_request)
            ):
                if described.error is None:
                    counts[described.group_id] = len(described.members)
        share_ids = [g.group_id for g in listed if g.group_type == SHARE]
        if share_ids:
            version = connection.api_version(ApiKey.SHARE_GROUP_DESCRIBE)
            share_request = build_share_group_describe_request(version, share_ids)
            for share in parse_share_group_describe_response(
                await connection.request(share_request)
            ):
                if share.error is None:
                    counts[share.group_id] = len(share.members)
        return counts

    async def _classic_member_counts(self, group_ids: list[str]) -> dict[str, int]:
        if not group_ids:
            return {}
        futures = self._admin_client().describe_consumer_groups(
            group_ids, request_timeout=self._timeout_ms / 1000
        )
        counts: dict[str, int] = {}
        for group_id, future in futures.items():
            description = await asyncio.wrap_future(future)
            counts[group_id] = len(description.members)
        return counts

    # -- describe -----------------------------------------------------------------------------

    async def describe_group(self, group_id: str) -> GroupDescription:
        """One group, described as its type allows.

        Raises:
            GroupNotFoundError: the group's coordinator does not list it.
        """
        connection = await self._cluster.coordinator_connection(group_id)
        version = connection.api_version(ApiKey.LIST_GROUPS)
        listed = parse_list_groups_response(
            await connection.request(build_list_groups_request(version))
        )
        found = next((g for g in listed if g.group_id == group_id), None)
        if found is None:
            raise GroupNotFoundError(group_id, connection.address)
        try:
            if found.group_type == SHARE:
                return await self._describe_share(group_id)
            if found.group_type == CONSUMER:
                return await self._describe_consumer(group_id)
            if found.group_type == CLASSIC:
                return await self._describe_classic(found)
        except GroupIdNotFoundError:
            # Listed a moment ago, gone now (deleted, or expired while empty).
            raise GroupNotFoundError(group_id, connection.address) from None
        return GroupDescription(
            group=group_id,
            type=found.group_type,
            state=found.state,
            group_epoch=None,
            assignment_epoch=None,
            assignor=None,
            members=None,
            partitions=(),
        )

    async def _describe_share(self, group_id: str) -> GroupDescription:
        def describe(versions: NegotiatedVersions) -> RequestPayload:
            version = versions.version_for(ApiKey.SHARE_GROUP_DESCRIBE)
            return build_share_group_describe_request(version, [group_id])

        def offsets(versions: NegotiatedVersions) -> RequestPayload:
            version = versions.version_for(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
            return build_describe_share_group_offsets_request(version, [group_id])

        (group,) = parse_share_group_describe_response(
            await self._cluster.coordinator_request(group_id, describe)
        )
        _raise(group.error)
        (group_offsets,) = parse_describe_share_group_offsets_response(
            await self._cluster.coordinator_request(group_id, offsets)
        )
        _raise(group_offsets.error)
        for partition in group_offsets.partitions:
            _raise(partition.error)
        return share_group_description(group, group_offsets.partitions)

    async def _describe_consumer(self, group_id: str) -> GroupDescription:
        def describe(versions: NegotiatedVersions) -> RequestPayload:
            version = versions.version_for(ApiKey.CONSUMER_GROUP_DESCRIBE)
            return build_consumer_group_describe_request(version, [group_id])

        (group,) = parse_consumer_group_describe_response(
            await self._cluster.coordinator_request(group_id, describe)
        )
        _raise(group.error)
        described = consumer_group_description(group, await self._committed(group_id))
        return with_lag(described, await self._end_offsets(described))

    async def _describe_classic(self, listed: ListedGroup) -> GroupDescription:
        futures = self._admin_client().describe_consumer_groups(
            [listed.group_id], request_timeout=self._timeout_ms / 1000
        )
        description = await asyncio.wrap_future(futures[listed.group_id])
        described = classic_group_description(
            listed.group_id,
            listed.state,
            description.members,
            await self._committed(listed.group_id),
            assignor=description.partition_assignor,
        )
        return with_lag(described, await self._end_offsets(described))

    async def _committed(self, group_id: str) -> list[CommittedOffsetLike]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self._admin_client().list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self._timeout_ms / 1000
        )
        result = await asyncio.wrap_future(futures[group_id])
        return list(result.topic_partitions or ())

    async def _end_offsets(self, description: GroupDescription) -> dict[tuple[str, int], int]:
        """The end offsets (high watermarks) of the partitions ``description`` committed on,
        from confluent-kafka's ``list_offsets``; a partition whose offset cannot be read (a
        deleted topic, a leader moving) is left out, so its lag stays unknown."""
        from confluent_kafka import KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        wanted = [p for p in description.partitions if p.committed_offset is not None]
        if not wanted:
            return {}
        futures = self._admin_client().list_offsets(
            {
                TopicPartition(p.topic, p.partition): OffsetSpec.latest()  # type: ignore[no-untyped-call]
                for p in wanted
            },
            request_timeout=self._timeout_ms / 1000,
        )
        ends: dict[tuple[str, int], int] = {}
        for partition, future in futures.items():
            try:
                info = await asyncio.wrap_future(future)
            except KafkaException:
                continue
            ends[(partition.topic, partition.partition)] = int(info.offset)
        return ends

    def _admin_client(self) -> Any:
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            try:
                self._admin = AdminClient(
                    {**self._admin_config, "bootstrap.servers": self._bootstrap_servers}
                )
            except KafkaException as error:
                reason = error.args[0].str() if error.args else str(error)
                raise ConfigError(
                    f"confluent-kafka's AdminClient refused the configuration: {reason}"
                ) from None
        return self._admin


def _listing(group: ListedGroup, members: int | None) -> GroupListing:
    return GroupListing(group.group_id, group.group_type, group.state, members)


def _raise(error: BrokerError | None) -> None:
    if error is not None:
        raise error
