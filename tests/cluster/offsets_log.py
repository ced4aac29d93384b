"""The broker's own record of a group's offset commits: the offset-commit records of
``__consumer_offsets``, in the order the group coordinator wrote them.

A member process stamps a commit when its ``commit()`` *returns*, so the merged timeline orders
two members' commits by when each member learned the outcome, not by when the broker applied
them. A member frozen (SIGSTOP) while its commit's answer is on the way learns of it only when it
resumes, possibly after another member, which took its partitions over, committed further: the
timeline then shows a commit "going back" that the broker applied first. The log read here is
the broker's order, so a commit regression counted on it is one the group really saw.
"""

from __future__ import annotations

import re
import struct
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka import Consumer as ConfluentConsumer

OFFSETS_TOPIC = "__consumer_offsets"
#: Key versions of offset-commit records (the others are group metadata records).
_OFFSET_COMMIT_KEY_VERSIONS = (0, 1)


@dataclass(frozen=True)
class LoggedCommit:
    """One offset-commit record: ``offset`` of ``topic[partition]``, written at ``log_offset``
    of ``__consumer_offsets`` partition ``log_partition``."""

    topic: str
    partition: int
    offset: int
    log_partition: int
    log_offset: int


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    start = at + 2
    return data[start : start + length].decode(), start + length


def parse_commit(key: bytes, value: bytes | None) -> tuple[str, str, int, int] | None:
    """``(group, topic, partition, offset)`` of an offset-commit record, or None for any other
    record (group metadata, a tombstone)."""
    (version,) = struct.unpack_from(">h", key, 0)
    if version not in _OFFSET_COMMIT_KEY_VERSIONS or value is None:
        return None
    group, at = _string(key, 2)
    topic, at = _string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    (offset,) = struct.unpack_from(">q", value, 2)  # after the int16 value version
    return group, topic, partition, offset


def logged_commits(bootstrap: str, group: str, timeout_s: float = 60.0) -> list[LoggedCommit]:
    """Every offset commit of ``group`` in ``__consumer_offsets``, in log order (one group's
    records all live in one partition of it), read up to the current end."""
    reader = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kgm-offsets-log-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    found: list[LoggedCommit] = []
    try:
        partitions = reader.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions
        ends = {
            p: reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, p), timeout=10)[1]
            for p in partitions
        }
        reader.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in ends])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"{OFFSETS_TOPIC} not read to its end"
            for msg in reader.consume(1000, 1.0):
                if msg.error() is not None:
                    continue
                log_partition, log_offset = msg.partition() or 0, msg.offset() or 0
                if log_offset + 1 >= ends[log_partition]:
                    done.add(log_partition)
                parsed = parse_commit(msg.key() or b"\0\0", msg.value())
                if parsed is not None and parsed[0] == group:
                    _, topic, partition, offset = parsed
                    found.append(LoggedCommit(topic, partition, offset, log_partition, log_offset))
    finally:
        reader.close()
    return sorted(found, key=lambda c: (c.log_partition, c.log_offset))


def logged_regressions(commits: list[LoggedCommit]) -> list[str]:
    """Each commit the broker wrote below the highest it had written before for that partition."""
    highest: dict[tuple[str, int], int] = defaultdict(lambda: -1)
    found: list[str] = []
    for commit in commits:
        key = (commit.topic, commit.partition)
        if commit.offset < highest[key]:
            found.append(
                f"{commit.topic}[{commit.partition}] committed {commit.offset} after "
                f"{highest[key]} ({OFFSETS_TOPIC}-{commit.log_partition}@{commit.log_offset})"
            )
        highest[key] = max(highest[key], commit.offset)
    return found


_TIMELINE_REGRESSION = re.compile(r"^\[commit_regression\] (\S+)\[(\d+)\] ")


def broker_order_problems(
    problems: list[str],
    accepted: Iterable[tuple[str, int, int]],
    logged: list[LoggedCommit],
) -> tuple[list[str], int]:
    """``problems`` judged on the broker's order of commits: a commit regression of the timeline
    on a partition whose log shows none was reported late, not made, and is taken out (their
    count is returned); each regression in the log, and each ``accepted`` commit ``(topic,
    partition, offset)`` the log lacks, is a problem."""
    in_log = {(c.topic, c.partition, c.offset) for c in logged}
    regressed = logged_regressions(logged)
    regressed_partitions = {line.split(" ", 1)[0] for line in regressed}
    kept: list[str] = []
    reported_late = 0
    for problem in problems:
        match = _TIMELINE_REGRESSION.match(problem)
        if match and f"{match[1]}[{match[2]}]" not in regressed_partitions:
            reported_late += 1
            continue
        kept.append(problem)
    kept += [f"[commit_regression_in_log] {line}" for line in regressed]
    missing = sorted(set(accepted) - in_log)
    kept += [f"[commit_not_in_log] {t}[{p}] offset {o} was accepted" for t, p, o in missing[:20]]
    return kept, reported_late
