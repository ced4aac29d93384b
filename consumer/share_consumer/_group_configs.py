"""Setting a share group's configs (``share.auto.offset.reset`` and the like) so that the group
sees them before its first read.

These are group configs, kept by the brokers: IncrementalAlterConfigs on the GROUP resource sets
them. The controller answers once the change is committed, but a broker applies it to its own
view a little later; a share-partition initialized in between starts from the old
``share.auto.offset.reset`` (``latest``) for good. So :func:`alter_share_group_configs` waits
until DescribeConfigs shows every value it set.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["alter_share_group_configs"]

#: How often the described configs are read again while a change is not visible yet.
_VISIBLE_POLL_INTERVAL_S: Final = 0.05


def alter_share_group_configs(
    admin: AdminClient,
    group_id: str,
    configs: Mapping[str, str],
    *,
    timeout_s: float = 30.0,
) -> None:
    """Set ``configs`` (``{"share.auto.offset.reset": "earliest", ...}``) on share group
    ``group_id`` and return once the brokers' DescribeConfigs shows every value.

    Call it before the group's first member subscribes: the start offset of a share-partition is
    fixed when the group first reads it.

    Raises:
        confluent_kafka.KafkaException: the brokers refused a config (the error names it).
        TimeoutError: the values were not visible within ``timeout_s`` (the message names what
            was still missing).
    """
    from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [
        ConfigEntry(name, str(value), incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource("GROUP", group_id, incremental_configs=entries)
    deadline = time.monotonic() + timeout_s
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=timeout_s)
    wanted = {name: str(value) for name, value in configs.items()}
    while True:
        # Read the future by its key: confluent-kafka completes the futures through this very
        # dict, so one taken out of it (popitem) never completes.
        group = ConfigResource("GROUP", group_id)
        remaining_s = max(0.1, deadline - time.monotonic())
        entries = admin.describe_configs([group])[group].result(remaining_s)
        seen = {name: entry.value for name, entry in entries.items()}
        missing = {name: value for name, value in wanted.items() if seen.get(name) != value}
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"share group {group_id!r}: configs not visible after {timeout_s} s: "
                f"{missing} (described: { {n: seen.get(n) for n in missing} })"
            )
        time.sleep(_VISIBLE_POLL_INTERVAL_S)
