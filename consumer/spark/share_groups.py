"""Share-group configuration (KIP-932) for the Spark work queue: what a group starts from, how
often a record may be delivered and how long a member may hold it.

These are group configs, not client keys: they are set on the broker (IncrementalAlterConfigs on
the GROUP resource) and apply to every member of the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from consumer.config import ConfigError

__all__ = ["OffsetReset", "admin_config", "configure_share_group", "share_group_configs"]

OffsetReset = Literal["earliest", "latest"]
#: Client keys an AdminClient takes from a share consumer's configuration (by prefix).
_ADMIN_KEY_PREFIXES = (
    "bootstrap.servers",
    "client.id",
    "client.dns.lookup",
    "security.protocol",
    "ssl.",
    "sasl.",
    "socket.",
    "broker.address.family",
    "reconnect.backoff",
    "retry.backoff",
    "request.timeout.ms",
)


def positive_int(name: str, value: object) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is an int >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def admin_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The client keys of a share consumer's configuration that an AdminClient takes."""
    return {k: v for k, v in conf.items() if k.startswith(_ADMIN_KEY_PREFIXES)}


def configure_share_group(
    conf: Mapping[str, Any],
    *,
    auto_offset_reset: OffsetReset | None = None,
    delivery_count_limit: int | None = None,
    record_lock_duration_ms: int | None = None,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """Set share-group configs of ``conf["group.id"]`` (IncrementalAlterConfigs, GROUP resource).

    ``auto_offset_reset`` is ``share.auto.offset.reset``: where the group starts on a partition
    it has never read. Kafka's default is ``latest``: records produced before the group's first
    read are never delivered. ``delivery_count_limit`` (``share.delivery.count.limit``, broker
    default 5) is the number of deliveries after which the broker archives a record itself;
    ``record_lock_duration_ms`` (``share.record.lock.duration.ms``, default 30 000) is how long
    a member may hold a record before it goes back to the group. Set them before the group
    first reads; the broker's ``group.share.min.*``/``max.*`` bounds apply. Returns the configs
    set (key -> value). The AdminClient gets only the client keys of ``conf`` (bootstrap,
    security, ``client.id``, ...).
    """
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource

    group_id = conf.get("group.id")
    if not group_id:
        raise ConfigError("'group.id' is required: it names the share group to configure")
    wanted: dict[str, str] = {}
    if auto_offset_reset is not None:
        if auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(
                f"auto_offset_reset (share.auto.offset.reset) must be 'earliest' or 'latest', "
                f"got {auto_offset_reset!r}"
            )
        wanted["share.auto.offset.reset"] = auto_offset_reset
    if delivery_count_limit is not None:
        positive_int("delivery_count_limit", delivery_count_limit)
        wanted["share.delivery.count.limit"] = str(delivery_count_limit)
    if record_lock_duration_ms is not None:
        positive_int("record_lock_duration_ms", record_lock_duration_ms)
        wanted["share.record.lock.duration.ms"] = str(record_lock_duration_ms)
    if not wanted:
        raise ValueError(
            "nothing to set: give auto_offset_reset, delivery_count_limit or "
            "record_lock_duration_ms"
        )
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in wanted.items()
    ]
    resource = ConfigResource("GROUP", str(group_id), incremental_configs=entries)
    admin = AdminClient(admin_config(conf))
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=timeout_s)
    return wanted


def share_group_configs(conf: Mapping[str, Any], timeout_s: float = 30.0) -> dict[str, str]:
    """The share group's effective ``share.*`` configs (DescribeConfigs on the GROUP resource,
    defaults included), e.g. ``{"share.delivery.count.limit": "5", ...}``."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._config import ConfigResource

    group_id = conf.get("group.id")
    if not group_id:
        raise ConfigError("'group.id' is required: it names the share group to describe")
    resource = ConfigResource("GROUP", str(group_id))
    admin = AdminClient(admin_config(conf))
    entries = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    return {
        name: str(entry.value)
        for name, entry in entries.items()
        if name.startswith("share.") and entry.value is not None
    }
