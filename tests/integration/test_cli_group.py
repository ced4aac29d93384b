"""``kgm group list`` / ``kgm group describe`` against the real broker.

One set of groups per module: a share group of two ``consumer.ShareConsumer`` members on a
2-partition topic that consumed and acknowledged two rounds of records (so the share-partition
start offsets moved) and then had more produced (so the broker reports a lag); a KIP-848 consumer
group of one ``consumer.Consumer`` (static, with a rack) that committed; an empty consumer group
(its member committed and closed); and a classic group of one confluent-kafka consumer. The JSON
output is parsed and checked field by field against what the members themselves know.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from share_wire_support import set_share_group_configs
from support import wait_until

from consumer import Consumer, ShareConsumer
from consumer.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROUND_RECORDS_PER_PARTITION = 10
UNCONSUMED_PER_PARTITION = 3
CONSUMER_RECORDS_PER_PARTITION = 5
#: Produced after the consumer groups committed: their lag.
LATER_RECORDS_PER_PARTITION = 2
BOUND_S = 30.0
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Groups:
    """The module's groups and the members that are still running."""

    bootstrap: str
    share_topic: str
    consumer_topic: str
    share_group: str
    consumer_group: str
    empty_group: str
    classic_group: str
    share_members: list[ShareConsumer] = field(default_factory=list)
    consumer: Consumer | None = None
    classic: confluent_kafka.Consumer | None = None


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 2) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(per_partition * partitions):
        producer.produce(topic, value=f"v{index}".encode(), partition=index % partitions)
    assert producer.flush(30) == 0


def run_kgm(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["group", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def kgm_json(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> Any:
    code, out, err = run_kgm(capsys, *args, "--bootstrap-server", bootstrap, "--output", "json")
    assert code == 0, err
    return json.loads(out)


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    """``kgm group describe GROUP --output json`` as a process (for bounded polling)."""
    result = subprocess.run(
        [sys.executable, "-m", "consumer.cli", "group", "describe", group]
        + ["--bootstrap-server", bootstrap, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    described: dict[str, Any] = json.loads(result.stdout)
    return described


def consume_share(members: list[ShareConsumer], count: int) -> None:
    got = 0
    deadline = time.monotonic() + BOUND_S
    while got < count:
        assert time.monotonic() < deadline, f"share members got {got} of {count} records"
        for member in members:
            got += len(member.poll(0.3))
    for member in members:
        member.commit_sync(30)  # ACCEPTs the last poll's records, and waits for the broker


def consume_until_committed(consumer: Consumer, expected: int) -> None:
    seen = 0
    deadline = time.monotonic() + BOUND_S
    while seen < expected or len(consumer.assignment()) < 2:
        assert time.monotonic() < deadline, f"consumed {seen} of {expected}, {consumer.state}"
        message = consumer.poll(0.3)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)


@pytest.fixture(scope="module")
def groups(kafka_bootstrap: str, admin: AdminClient) -> Iterator[Groups]:
    suffix = uuid.uuid4().hex[:8]
    made = Groups(
        bootstrap=kafka_bootstrap,
        share_topic=f"cli-share-{suffix}",
        consumer_topic=f"cli-consumer-{suffix}",
        share_group=f"cli-share-group-{suffix}",
        consumer_group=f"cli-consumer-group-{suffix}",
        empty_group=f"cli-empty-group-{suffix}",
        classic_group=f"cli-classic-group-{suffix}",
    )
    for topic in (made.share_topic, made.consumer_topic):
        admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(30)
    try:
        _start_share_group(made, admin)
        _start_consumer_groups(made)
        yield made
    finally:
        for member in made.share_members:
            member.close()
        if made.consumer is not None:
            made.consumer.close()
        if made.classic is not None:
            made.classic.close()


def _start_share_group(made: Groups, admin: AdminClient) -> None:
    set_share_group_configs(admin, made.share_group, share_auto_offset_reset="earliest")
    for name in ("a", "b"):
        member = ShareConsumer(
            {
                "bootstrap.servers": made.bootstrap,
                "group.id": made.share_group,
                "client.id": f"cli-share-{name}",
                "client.rack": f"rack-{name}",
            }
        )
        member.subscribe([made.share_topic])
        made.share_members.append(member)
    # Two acknowledged rounds: the broker persists a moved start offset with the next write.
    for _ in range(2):
        produce(made.bootstrap, made.share_topic, ROUND_RECORDS_PER_PARTITION)
        consume_share(made.share_members, 2 * ROUND_RECORDS_PER_PARTITION)
    produce(made.bootstrap, made.share_topic, UNCONSUMED_PER_PARTITION)


def _start_consumer_groups(made: Groups) -> None:
    produce(made.bootstrap, made.consumer_topic, CONSUMER_RECORDS_PER_PARTITION)
    base = {
        "bootstrap.servers": made.bootstrap,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    empty = Consumer({**base, "group.id": made.empty_group, "client.id": "cli-empty"})
    empty.subscribe([made.consumer_topic])
    consume_until_committed(empty, 2 * CONSUMER_RECORDS_PER_PARTITION)
    empty.close()
    made.consumer = Consumer(
        {
            **base,
            "group.id": made.consumer_group,
            "client.id": "cli-consumer",
            "group.instance.id": "cli-static-1",
            "client.rack": "rack-c",
        }
    )
    made.consumer.subscribe([made.consumer_topic])
    consume_until_committed(made.consumer, 2 * CONSUMER_RECORDS_PER_PARTITION)
    made.classic = confluent_kafka.Consumer(
        {
            **base,
            "group.id": made.classic_group,
            "client.id": "cli-classic",
            "group.protocol": "classic",
        }
    )
    made.classic.subscribe([made.consumer_topic])
    deadline = time.monotonic() + BOUND_S
    while len(made.classic.assignment()) < 2:
        assert time.monotonic() < deadline, "the classic consumer got no assignment"
        made.classic.poll(0.3)
    produce(made.bootstrap, made.consumer_topic, LATER_RECORDS_PER_PARTITION)


def test_list_shows_every_group_with_its_type_state_and_members(
    groups: Groups, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = kgm_json(capsys, groups.bootstrap, "list")
    by_group = {entry["group"]: entry for entry in listed}
    assert all(set(entry) == {"group", "type", "state", "members"} for entry in listed)
    assert by_group[groups.share_group] == {
        "group": groups.share_group,
        "type": "share",
        "state": "Stable",
        "members": 2,
    }
    assert by_group[groups.consumer_group]["type"] == "consumer"
    assert by_group[groups.consumer_group]["members"] == 1
    assert by_group[groups.empty_group] == {
        "group": groups.empty_group,
        "type": "consumer",
        "state": "Empty",
        "members": 0,
    }
    assert by_group[groups.classic_group]["type"] == "classic"
    assert by_group[groups.classic_group]["members"] == 1
    assert [entry["group"] for entry in listed] == sorted(by_group)

    code, out, _ = run_kgm(capsys, "list", "--bootstrap-server", groups.bootstrap)
    assert code == 0
    share_row = next(line for line in out.splitlines() if line.startswith(groups.share_group))
    assert share_row.split() == [groups.share_group, "share", "Stable", "2"]


def test_describe_share_group_reports_members_assignments_and_offsets(groups: Groups) -> None:
    # Bounded polling: the coordinator settles the assignment epoch and the state on its own.
    described: dict[str, Any] = {}

    def settled() -> bool:
        described.update(describe(groups.bootstrap, groups.share_group))
        epochs = {m["member_epoch"] for m in described["members"]}
        return described["state"] == "Stable" and epochs == {described["assignment_epoch"]}

    wait_until(settled, BOUND_S, "the share group settles", lambda: json.dumps(described))
    assert described["group"] == groups.share_group
    assert described["type"] == "share"
    assert described["group_epoch"] >= described["assignment_epoch"] >= 1
    assert described["assignor"] == "simple"

    members = {m["member_id"]: m for m in described["members"]}
    assert set(members) == {member.memberid() for member in groups.share_members}
    for name, member in zip("ab", groups.share_members, strict=True):
        view = members[member.memberid()]
        assert view["client_id"] == f"cli-share-{name}"
        assert view["rack"] == f"rack-{name}"
        assert view["instance_id"] is None
        assert view["target_assignment"] is None, "share groups report no target assignment"
        assert "127.0.0.1" in view["host"]
        assert view["assignment"], f"member {name} has no partition"
        assert all(p["topic"] == groups.share_topic for p in view["assignment"])
    assigned = sorted(p["partition"] for m in members.values() for p in m["assignment"])
    assert assigned == [0, 1], "two members, one partition each"

    partitions = described["partitions"]
    assert [(p["topic"], p["partition"]) for p in partitions] == [
        (groups.share_topic, 0),
        (groups.share_topic, 1),
    ]
    for partition in partitions:
        # Two rounds acknowledged: the start offset is at least past the first one.
        assert partition["start_offset"] >= ROUND_RECORDS_PER_PARTITION
        assert partition["start_offset"] <= 2 * ROUND_RECORDS_PER_PARTITION
        # Everything acknowledged except the records produced afterwards (KIP-1226 lag).
        assert partition["lag"] == UNCONSUMED_PER_PARTITION
        assert partition["leader_epoch"] >= 0
        assert partition["committed_offset"] is None


def test_describe_share_group_as_text(groups: Groups, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_kgm(
        capsys, "describe", groups.share_group, "--bootstrap-server", groups.bootstrap
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"GROUP {groups.share_group}  TYPE share  STATE ")
    assert lines[2].split()[:6] == [
        "MEMBER-ID",
        "INSTANCE-ID",
        "CLIENT-ID",
        "HOST",
        "RACK",
        "EPOCH",
    ]
    for member in groups.share_members:
        assert any(line.startswith(member.memberid()) for line in lines)
    header = next(line for line in lines if line.startswith("TOPIC "))
    assert header.split() == ["TOPIC", "PARTITION", "START-OFFSET", "LEADER-EPOCH", "LAG"]
    rows = [line.split() for line in lines if line.startswith(groups.share_topic)]
    assert [row[1] for row in rows] == ["0", "1"]
    assert [row[4] for row in rows] == [str(UNCONSUMED_PER_PARTITION)] * 2


def test_describe_consumer_group_reports_epochs_targets_and_commits(groups: Groups) -> None:
    consumer = groups.consumer
    assert consumer is not None
    described: dict[str, Any] = {}

    def agrees() -> bool:
        consumer.poll(0.1)  # keeps the member's callbacks and acks moving
        described.update(describe(groups.bootstrap, groups.consumer_group))
        members = described["members"]
        return (
            described["state"] == "Stable"
            and len(members) == 1
            and members[0]["member_epoch"] == consumer.member_epoch
        )

    wait_until(agrees, BOUND_S, "the coordinator and the member agree", lambda: str(described))
    assert described["type"] == "consumer"
    assert described["group_epoch"] >= described["assignment_epoch"] >= 1
    assert described["assignor"] == "uniform"
    (member,) = described["members"]
    assert member["member_id"] == consumer.memberid()
    assert member["instance_id"] == "cli-static-1"
    assert member["client_id"] == "cli-consumer"
    assert member["rack"] == "rack-c"
    everything = [{"topic": groups.consumer_topic, "partition": p} for p in (0, 1)]
    assert member["assignment"] == everything
    assert member["target_assignment"] == everything
    rows = [
        {key: value for key, value in row.items() if key != "leader_epoch"}
        for row in described["partitions"]
    ]
    assert rows == [
        {
            "topic": groups.consumer_topic,
            "partition": partition,
            "start_offset": None,
            "committed_offset": CONSUMER_RECORDS_PER_PARTITION,
            "lag": LATER_RECORDS_PER_PARTITION,  # end offset minus committed offset
        }
        for partition in (0, 1)
    ]
    epochs = [row["leader_epoch"] for row in described["partitions"]]
    assert all(epoch is None or epoch >= 0 for epoch in epochs), epochs


def test_describe_empty_group_keeps_its_commits(
    groups: Groups, capsys: pytest.CaptureFixture[str]
) -> None:
    described = kgm_json(capsys, groups.bootstrap, "describe", groups.empty_group)
    assert described["type"] == "consumer"
    assert described["state"] == "Empty"
    assert described["members"] == []
    assert [(p["partition"], p["committed_offset"], p["lag"]) for p in described["partitions"]] == [
        (0, CONSUMER_RECORDS_PER_PARTITION, LATER_RECORDS_PER_PARTITION),
        (1, CONSUMER_RECORDS_PER_PARTITION, LATER_RECORDS_PER_PARTITION),
    ]


def test_describe_classic_group_through_confluent_admin(
    groups: Groups, capsys: pytest.CaptureFixture[str]
) -> None:
    classic = groups.classic
    assert classic is not None
    described = kgm_json(capsys, groups.bootstrap, "describe", groups.classic_group)
    assert described["type"] == "classic"
    assert described["state"] == "Stable"
    assert described["group_epoch"] is None
    assert described["assignment_epoch"] is None
    assert described["assignor"] == "range", "librdkafka's first partition.assignment.strategy"
    (member,) = described["members"]
    assert member["member_id"] == classic.memberid()
    assert member["client_id"] == "cli-classic"
    assert member["member_epoch"] is None
    assert member["target_assignment"] is None
    assert member["assignment"] == [
        {"topic": groups.consumer_topic, "partition": p} for p in (0, 1)
    ]
    # It never commits (enable.auto.commit is off): no committed offset, so no lag either.
    assert [(p["committed_offset"], p["lag"]) for p in described["partitions"]] == [
        (None, None)
    ] * 2


def test_unknown_group_exits_1_naming_the_group(
    groups: Groups, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"no-such-group-{uuid.uuid4().hex[:8]}"
    code, out, err = run_kgm(capsys, "describe", missing, "--bootstrap-server", groups.bootstrap)
    assert code == 1
    assert out == ""
    assert f"group '{missing}' does not exist" in err
