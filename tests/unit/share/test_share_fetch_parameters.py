"""Share fetch batching parameters from the consumer config (sans-I/O)."""

from __future__ import annotations

import pytest

from consumer.share.fetch_parameters import AcquireMode, ShareFetchParameters, split_for_polls


def test_defaults_are_the_java_clients() -> None:
    params = ShareFetchParameters.from_config({"group.id": "g"})
    assert (params.max_wait_ms, params.min_bytes, params.max_records) == (500, 1, 500)
    assert params.batch_size == params.max_records
    assert params.max_bytes == 52_428_800
    assert params.acquire_mode is AcquireMode.BATCH_OPTIMIZED


def test_config_keys_are_read() -> None:
    params = ShareFetchParameters.from_config(
        {
            "fetch.max.wait.ms": "250",
            "fetch.min.bytes": 10,
            "fetch.max.bytes": 1024,
            "max.poll.records": 7,
            "share.acquire.mode": "record_limit",
        }
    )
    assert params == ShareFetchParameters(250, 10, 1024, 7, AcquireMode.RECORD_LIMIT)
    assert params.batch_size == 7


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max.poll.records": 0}, "max.poll.records must be between 1"),
        ({"fetch.max.wait.ms": -1}, "fetch.max.wait.ms must be between 0"),
        ({"fetch.min.bytes": "lots"}, "fetch.min.bytes must be an integer, got 'lots'"),
        ({"max.poll.records": True}, "max.poll.records must be an integer"),
        ({"share.acquire.mode": "greedy"}, "batch_optimized, record_limit, got 'greedy'"),
    ],
)
def test_bad_values_name_the_key_and_what_is_allowed(
    config: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ShareFetchParameters.from_config(config)


def test_records_are_cut_into_poll_sized_slices() -> None:
    assert split_for_polls(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert split_for_polls([], 3) == []
    with pytest.raises(ValueError, match="max.poll.records must be >= 1"):
        split_for_polls([1], 0)
