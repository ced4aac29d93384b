"""KIP-848's headline example as stated: a group of 10 consumers whose topic gains 900 partitions.

The published figure (about 5 s with KIP-848 against about 103 s with the classic protocol,
repeated by many write-ups; its set-up is unpublished) names only "10 consumers, 900 partitions
added". This part of ``benchmarks.scaling`` runs exactly that event: ``members``
busy members (one per process, as in the headline's cold join and rolling restart) own a topic of
``start`` partitions; the harness then adds ``added`` partitions with CreatePartitions, and the
clock runs from just before that call until every partition, old and new, is owned by exactly one
member on the callbacks and the broker agrees (:meth:`benchmarks.convergence.Group.wait_converged`).

What decides the outcome is who notices the new partitions. A KIP-848 coordinator follows the
cluster's metadata itself: the group's next heartbeat after the change bumps the group epoch,
and each member gets its share of the new, unowned partitions in the answer to its own next
heartbeat (at most one heartbeat interval, nothing to revoke first). A classic group learns of
them only when a member's client refreshes the topic's metadata (librdkafka's
``topic.metadata.refresh.interval.ms``, Java's ``metadata.max.age.ms``: 300 s by default in
both), then runs a rebalance. Classic members keep that default here, since the claim is about
defaults, so their time is the refresh phase (uniform over 0–300 s) plus the rebalance; the cap
is ``CLASSIC_GROWTH_CAP_S``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka.cimpl import NewPartitions

from benchmarks.common import admin_client, create_topic, log, warm_topic_for_groups
from benchmarks.convergence import BrokerProfile, Group

__all__ = ["CLASSIC_GROWTH_CAP_S", "KIP848_GROWTH_CAP_S", "growth_part", "run_growth"]

#: librdkafka's default ``topic.metadata.refresh.interval.ms`` (300 s) plus room for the
#: rebalance: a classic growth slower than this is recorded as capped.
CLASSIC_GROWTH_CAP_S = 360.0
#: A KIP-848 growth slower than this is recorded as failed (the bound is one heartbeat interval
#: plus round trips; this leaves room for a loaded machine).
KIP848_GROWTH_CAP_S = 60.0
_KIP848 = ("ours", "confluent-848")


def _grow(bootstrap: str, topic: str, total: int) -> None:
    admin = admin_client(bootstrap)
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(60)


def run_growth(
    profile: BrokerProfile,
    impls: tuple[str, ...],
    members: int,
    start: int,
    added: int,
    busy_ms: int,
) -> list[dict[str, Any]]:
    """For each implementation: a fresh topic of ``start`` partitions, ``members`` busy members
    converged on it, then ``added`` partitions more; returns one row per implementation."""
    rows: list[dict[str, Any]] = []
    for impl in impls:
        topic = f"bench-grow-{impl}-{uuid.uuid4().hex[:6]}"
        create_topic(profile.bootstrap, topic, start)
        warm_topic_for_groups(profile.bootstrap, topic, start)
        group = Group(profile, impl, topic, start)
        group.extra_spec = {"busy_ms": busy_ms}
        names = [f"m{i + 1}" for i in range(members)]
        limit = KIP848_GROWTH_CAP_S if impl in _KIP848 else CLASSIC_GROWTH_CAP_S
        row: dict[str, Any] = {"impl": impl, "start_partitions": start, "added": added}
        started = time.monotonic()
        try:
            group.spawn(names, timeout_s=180)
            group.wait_converged(names, group.go(names), 120.0)
            group.partitions = start + added
            t0 = time.monotonic()
            _grow(profile.bootstrap, topic, start + added)
            row["create_partitions_s"] = time.monotonic() - t0
            # A classic member's periodic metadata refresh counts from its client's start.
            row["growth_after_start_s"] = t0 - started
            outcome = group.wait_converged(names, t0, limit)
            for key in ("t0", "timeline"):
                outcome.pop(key, None)
            row.update(outcome)
        except TimeoutError as exc:
            row["failed" if impl in _KIP848 else "capped"] = {"timeout_s": limit, "error": str(exc)}
        finally:
            group.shutdown()
        row["elapsed_s"] = time.monotonic() - started
        log(f"growth {impl}: {row.get('converge_s', -1):.2f}s after adding {added} partitions")
        rows.append(row)
    return rows


def growth_part(
    profile: BrokerProfile, impls: tuple[str, ...], plan: tuple[int, int, int], busy_ms: int
) -> dict[str, Any]:
    """The growth part of ``benchmarks.scaling``: ``plan`` is (members, start, added)."""
    members, start, added = plan
    return {
        "members": members,
        "start_partitions": start,
        "added": added,
        "busy_ms": busy_ms,
        "heartbeat_ms": profile.heartbeat_ms,
        "session_ms": profile.session_ms,
        "rows": run_growth(profile, impls, members, start, added, busy_ms),
    }
