"""Guards and pure planning of the Spark integration (a live member only for the pickling test)."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable

import pytest
from pyspark import cloudpickle

from consumer.spark import check_cluster
from consumer.spark._host import MemberHost
from consumer.spark._spec import GroupSpec, OffsetRange
from consumer.spark.source import (
    KafkaGroupDataSource,
    KafkaGroupStreamReader,
    RangePartition,
    decode_offsets,
    encode_offsets,
    plan_ranges,
    spec_from_options,
)

pytestmark = pytest.mark.spark


def test_speculation_is_refused_with_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"spark\.speculation=true"):
        check_cluster({"spark.speculation": "true"}, default_parallelism=2, num_members=2)
    check_cluster({"spark.speculation": "false"}, default_parallelism=2, num_members=2)


def test_more_members_than_task_slots_warns() -> None:
    with pytest.warns(RuntimeWarning, match="only 2 task slots"):
        check_cluster({}, default_parallelism=2, num_members=3)


def test_options_are_validated() -> None:
    base = {"kafka.bootstrap.servers": "b:9092", "subscribe": "a,b", "groupId": "g"}
    spec = spec_from_options({**base, "kafka.security.protocol": "PLAINTEXT"})
    assert spec.topics == ("a", "b")
    assert dict(spec.client_config) == {"security.protocol": "PLAINTEXT"}
    assert "security.protocol" in spec.fetcher_config()
    assert spec.fetcher_config()["group.id"] == "g.spark-fetch"
    with pytest.raises(ValueError, match="groupId"):
        spec_from_options({k: v for k, v in base.items() if k != "groupId"})
    with pytest.raises(ValueError, match="subscribe"):
        spec_from_options({**base, "subscribePattern": "a.*"})
    with pytest.raises(ValueError, match="startingOffsets"):
        spec_from_options({**base, "startingOffsets": "{}"})
    with pytest.raises(ValueError, match=r"'group.protocol' must be 'consumer'.*'classic'"):
        spec_from_options({**base, "kafka.group.protocol": "classic"})
    assert spec_from_options({**base, "kafka.group.protocol": "CONSUMER"}).group_id == "g"
    pattern = spec_from_options({**base, "subscribe": "", "subscribePattern": "orders-.*"})
    assert pattern.subscription == ["^orders-.*"]


def test_planning_is_a_pure_function_of_the_offsets() -> None:
    start = encode_offsets({("t", 0): 10, ("t", 1): 5}, {})
    # Partition 1 was revoked (left out), partition 2 is new and begins at its committed offset.
    end = encode_offsets({("t", 0): 25, ("t", 2): 40}, {("t", 2): 30})
    assert json.loads(json.dumps(end)) == end
    assert decode_offsets(end) == ({("t", 0): 25, ("t", 2): 40}, {("t", 2): 30})
    expected = [OffsetRange("t", 0, 10, 25), OffsetRange("t", 2, 30, 40)]
    assert plan_ranges(start, end) == expected
    assert plan_ranges(start, end) == expected  # a replay plans the same ranges
    assert plan_ranges(end, end) == []  # no new data: no task
    # Same content, same JSON: Spark compares offsets as strings.
    assert json.dumps(encode_offsets({("t", 1): 1, ("t", 0): 2}, {})) == json.dumps(
        encode_offsets({("t", 0): 2, ("t", 1): 1}, {})
    )


def test_nothing_unpicklable_crosses_to_executors_while_a_member_is_live(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    unique_name: Callable[[str], str],
) -> None:
    topic = create_topic(1)
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        "groupId": unique_name("group"),
        "subscribe": topic,
    }
    source = KafkaGroupDataSource(options)
    reader = source.streamReader(None)  # type: ignore[arg-type]
    assert isinstance(reader, KafkaGroupStreamReader)
    offset = reader.initialOffset()  # starts the member in this process
    try:
        assert reader._host is not None
        assert reader._host.wait_for(
            lambda: reader._host is not None and bool(reader._host.owned), 30
        )
        for value in (source, reader, RangePartition(OffsetRange(topic, 0, 0, 1)), offset):
            restored = pickle.loads(cloudpickle.dumps(value))
            assert restored is not None
        copy = pickle.loads(cloudpickle.dumps(reader))
        assert copy._host is None
        assert copy.spec == GroupSpec.from_json(reader.spec.to_json())
    finally:
        reader.stop()


def test_member_plans_owned_unrevoked_partitions_from_their_committed_offsets() -> None:
    spec = GroupSpec.create(bootstrap_servers="b:9092", group_id="g", topics="t")
    host = MemberHost(spec)  # not started: planning is driven by the ownership tables
    marks = {("t", 0): (0, 50), ("t", 1): (5, 60), ("t", 2): (0, 70), ("t", 4): (0, 9)}
    host.watermarks = lambda keys: {k: marks[k] for k in keys if k in marks}  # type: ignore[method-assign]
    host.owned = {("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 4), ("t", 5)}
    host.revoking = {("t", 4)}
    host.acquired = {("t", 1), ("t", 2), ("t", 5)}
    host.committed = {("t", 1): -1, ("t", 2): 20}
    start = {("t", 0): 10, ("t", 2): 30, ("t", 3): 7}
    end, begin = host.plan(start)
    # 0 continues; 1 has no commit (earliest = low watermark); 2 never goes back before the
    # checkpoint; 3 has no watermark (no new data); 4 is being revoked; 5 waits for a watermark.
    assert end == {("t", 0): 50, ("t", 1): 60, ("t", 2): 70, ("t", 3): 7}
    assert begin == {("t", 1): 5}
    assert host.acquired == {("t", 5)}
    assert host.planned_end == end
    ranges = plan_ranges(encode_offsets(start, {}), encode_offsets(end, begin))
    assert ranges == [
        OffsetRange("t", 0, 10, 50),
        OffsetRange("t", 1, 5, 60),
        OffsetRange("t", 2, 30, 70),
    ]
