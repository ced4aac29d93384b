"""``Consumer.metrics()`` and the member's metrics in the ``stats_cb`` JSON.

The metrics themselves are counted by the background runtime (``consumer.member.metrics``); this
module reads them for the application thread and splices them into librdkafka's statistics.
"""

from __future__ import annotations

import inspect
import json
import weakref
from collections.abc import Callable
from typing import Any

from consumer._bridge.handle import RuntimeHandle
from consumer.member.metrics import MemberMetrics

__all__ = ["STATS_KEY", "member_metrics", "with_member_stats"]

#: The top-level key of the ``stats_cb`` JSON that holds ``Consumer.metrics()``.
STATS_KEY = "group_member"


def member_metrics(runtime: RuntimeHandle | None) -> dict[str, float]:
    """The runtime's metrics, or those of a member that never ran (before ``subscribe()``)."""
    if runtime is None:
        return MemberMetrics(0).snapshot(0, member_epoch=0)
    return runtime.metrics()


def with_member_stats(
    data_plane: dict[str, Any], metrics: Callable[[], dict[str, float]]
) -> dict[str, Any]:
    """``data_plane`` with its ``stats_cb`` (if any) given the member's metrics too.

    librdkafka's statistics JSON gains one top-level key, :data:`STATS_KEY`, spliced in as text
    (the statistics are not parsed again), so the cost is one small ``json.dumps`` per report.
    A bound method (``Consumer.metrics``) is held weakly: the data plane does not keep its
    consumer alive.
    """
    user_stats_cb = data_plane.get("stats_cb")
    if user_stats_cb is None:
        return data_plane
    if inspect.ismethod(metrics):
        held: Callable[[], Callable[[], dict[str, float]] | None] = weakref.WeakMethod(metrics)
    else:
        held = lambda: metrics  # noqa: E731 - a strong reference, same shape as the weak one

    def stats_cb(stats_json: str) -> None:
        read = held()
        user_stats_cb(stats_json if read is None else add_member_stats(stats_json, read()))

    return {**data_plane, "stats_cb": stats_cb}


def add_member_stats(stats_json: str, metrics: dict[str, float]) -> str:
    """``stats_json`` (a JSON object) with ``metrics`` under :data:`STATS_KEY`."""
    body = stats_json.lstrip()
    if not body.startswith("{"):
        return stats_json  # not an object: hand it on untouched
    member = f'"{STATS_KEY}":{json.dumps(metrics, separators=(",", ":"))}'
    rest = body[1:].lstrip()
    return "{" + member + ("" if rest.startswith("}") else ",") + rest
