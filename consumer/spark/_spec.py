"""Picklable descriptions of a group and of offset ranges: the only things sent to executors.

Nothing here imports pyspark or builds a client. A :class:`GroupSpec` says how to reach the
cluster and which group to join; it derives the configuration of the group *member* (our
:class:`consumer.Consumer`) and of the assign-mode *fetchers* that executors use to read ranges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from consumer._config.spec import spec_default

TopicPartitionKey = tuple[str, int]
StartingOffsets = Literal["earliest", "latest"]

#: Member-only keys: never given to a fetcher (it neither joins nor commits).
_MEMBER_ONLY_KEYS = frozenset(
    {
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.remote.assignor",
        "max.poll.interval.ms",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "auto.offset.reset",
        "client.rack",
    }
)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True)
class GroupSpec:
    """How to reach the cluster, which group to join and what to subscribe to.

    ``client_config`` holds extra librdkafka keys (TLS, SASL, ``max.poll.interval.ms``, ...)
    used by the member; the fetchers get the same keys minus the group-only ones.
    Frozen and made of plain values, so it pickles to executors unchanged.
    """

    bootstrap_servers: str
    group_id: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: StartingOffsets = "earliest"
    client_config: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ValueError("bootstrap_servers is required")
        if not self.group_id:
            raise ValueError("group_id is required")
        if bool(self.topics) == bool(self.topic_pattern):
            raise ValueError("give exactly one of topics (names) or topic_pattern (a regex)")
        for topic in self.topics:
            if _TOPIC_NAME.fullmatch(topic) is None:
                raise ValueError(f"invalid topic name {topic!r}")
        if self.starting_offsets not in ("earliest", "latest"):
            raise ValueError(
                f"starting offsets must be 'earliest' or 'latest', got {self.starting_offsets!r}"
            )
        for key, _ in self.client_config:
            if key in ("bootstrap.servers", "group.id"):
                raise ValueError(f"{key!r} is set by its own argument, not in the client config")
        protocol = dict(self.client_config).get(
            "group.protocol", spec_default("group.protocol", str)
        )
        if str(protocol).lower() != "consumer":
            # The hosted member fences its commits with the KIP-848 member epoch and watches
            # member states; a classic-protocol consumer has neither.
            raise ValueError(
                f"'group.protocol' must be 'consumer' for a Spark group source, got {protocol!r}"
            )

    @classmethod
    def create(
        cls,
        *,
        bootstrap_servers: str,
        group_id: str,
        topics: tuple[str, ...] | list[str] | str = (),
        topic_pattern: str | None = None,
        starting_offsets: StartingOffsets = "earliest",
        client_config: Mapping[str, Any] | None = None,
    ) -> GroupSpec:
        """Build a spec; ``topics`` may be a comma-separated string or a sequence."""
        if isinstance(topics, str):
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        return cls(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            topics=tuple(topics),
            topic_pattern=topic_pattern or None,
            starting_offsets=starting_offsets,
            client_config=tuple(sorted((client_config or {}).items())),
        )

    @property
    def subscription(self) -> list[str]:
        """What to pass to ``Consumer.subscribe``: names, or one ``^regex``."""
        if self.topic_pattern is not None:
            pattern = self.topic_pattern
            return [pattern if pattern.startswith("^") else f"^{pattern}"]
        return list(self.topics)

    @property
    def rebalance_timeout_s(self) -> float:
        """The member's rebalance timeout (``max.poll.interval.ms``, 300 s by default)."""
        default = spec_default("max.poll.interval.ms", int)
        value = dict(self.client_config).get("max.poll.interval.ms", default)
        return int(value) / 1000

    def member_config(self, **overrides: Any) -> dict[str, Any]:
        """Configuration of a group member (our ``Consumer``): manual commits only."""
        config: dict[str, Any] = dict(self.client_config)
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": self.group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": self.starting_offsets,
            }
        )
        config.update(overrides)
        return config

    def fetcher_config(self) -> dict[str, Any]:
        """Configuration of an assign-mode ``confluent_kafka.Consumer`` that never joins."""
        config = {k: v for k, v in self.client_config if k not in _MEMBER_ONLY_KEYS}
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                # librdkafka wants a group id even in assign mode; this one is never joined.
                "group.id": f"{self.group_id}.spark-fetch",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
            }
        )
        return config

    def to_json(self) -> str:
        """A JSON form, for passing the spec through data source options."""
        return json.dumps(
            {
                "bootstrap_servers": self.bootstrap_servers,
                "group_id": self.group_id,
                "topics": list(self.topics),
                "topic_pattern": self.topic_pattern,
                "starting_offsets": self.starting_offsets,
                "client_config": [list(item) for item in self.client_config],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> GroupSpec:
        """Inverse of :meth:`to_json`."""
        data = json.loads(text)
        return cls(
            bootstrap_servers=data["bootstrap_servers"],
            group_id=data["group_id"],
            topics=tuple(data["topics"]),
            topic_pattern=data["topic_pattern"],
            starting_offsets=data["starting_offsets"],
            client_config=tuple((k, v) for k, v in data["client_config"]),
        )


@dataclass(frozen=True, order=True)
class OffsetRange:
    """The records ``[start, end)`` of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def key(self) -> TopicPartitionKey:
        """``(topic, partition)``."""
        return (self.topic, self.partition)

    @property
    def count(self) -> int:
        """Number of offsets in the range (records, unless compacted or transactional)."""
        return max(0, self.end - self.start)


def ranges_to_json(ranges: tuple[OffsetRange, ...]) -> str:
    """Serialize ranges for a data source option."""
    return json.dumps([[r.topic, r.partition, r.start, r.end] for r in ranges])


def ranges_from_json(text: str) -> tuple[OffsetRange, ...]:
    """Inverse of :func:`ranges_to_json`."""
    return tuple(OffsetRange(str(t), int(p), int(s), int(e)) for t, p, s, e in json.loads(text))
