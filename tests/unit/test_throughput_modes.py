"""The throughput benchmark's mode split and its report: rates of one call shape that fall into
two modes (librdkafka's fetch backoff decides which) are summarised per mode, with ratios inside
each mode, and the ``unbounded`` prefetch setting gets its own tables and target rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks import throughput
from benchmarks.throughput import IMPLEMENTATIONS, split_modes, summarise
from benchmarks.throughput_report import throughput_headline, throughput_section


def test_rates_within_a_factor_of_two_form_one_mode() -> None:
    assert split_modes([200_000, 250_000, 380_000]) is None
    assert split_modes([150_000]) is None
    assert split_modes([]) is None


def test_the_widest_gap_splits_two_modes_at_the_geometric_mean() -> None:
    threshold = split_modes([142_000, 157_000, 569_000, 664_000, 674_000, 279_000])
    # widest neighbour ratio: 157 k -> 279 k is 1.78, 279 k -> 569 k is 2.04
    assert threshold == pytest.approx(math.sqrt(279_000 * 569_000))


def _run(impl: str, rate: float, rep: int) -> dict[str, Any]:
    return {
        "impl": impl,
        "records_per_s": rate,
        "steady_records_per_s": rate * 1.05,
        "thread_cpu_us_per_record": 1.5,
        "process_cpu_us_per_record": 2.5,
        "assigned_s": 0.01,
        "first_record_s": 0.1,
        "consumed": 10,
        "expected": 10,
        "repetition": rep,
    }


def _bimodal_runs() -> list[dict[str, Any]]:
    rates = {
        "confluent-assign": [110_000, 520_000, 540_000],
        "confluent-848-poll": [150_000, 600_000, 680_000],
        "ours-poll": [145_000, 155_000, 620_000],
        "confluent-848-consume": [540_000, 550_000, 560_000],
        "ours-consume": [590_000, 600_000, 610_000],
    }
    return [
        _run(impl, rate, rep) for impl in IMPLEMENTATIONS for rep, rate in enumerate(rates[impl])
    ]


def test_each_mode_gets_its_own_medians_and_ratio_to_the_shapes_base() -> None:
    summary = summarise(_bimodal_runs())
    poll = summary["modes"]["poll"]
    threshold = poll["threshold_records_per_s"]
    assert threshold == pytest.approx(math.sqrt(155_000 * 600_000))
    assert poll["low"]["stats"]["ours-poll"]["n"] == 2
    assert poll["low"]["stats"]["confluent-848-poll"]["median"] == 150_000
    assert poll["low"]["ratios"]["ours-poll"] == pytest.approx(150_000 / 150_000)
    assert poll["high"]["ratios"]["ours-poll"] == pytest.approx(620_000 / 640_000)
    # (a) does not decide the modes but is classified by the threshold the others give
    assert poll["low"]["stats"]["confluent-assign"]["n"] == 1
    assert poll["high"]["stats"]["confluent-assign"]["n"] == 2
    assert summary["modes"]["consume"] == {"threshold_records_per_s": None}
    assert summary["thread_cpu_us_per_record"]["ours-consume"]["median"] == 1.5


def test_a_way_without_runs_in_a_mode_has_no_ratio_there() -> None:
    runs = [
        r for r in _bimodal_runs() if not (r["impl"] == "ours-poll" and r["records_per_s"] > 6e5)
    ]
    high = summarise(runs)["modes"]["poll"]["high"]
    assert high["stats"]["ours-poll"]["n"] == 0
    assert "ours-poll" not in high["ratios"]


def test_the_report_shows_the_modes_and_the_unbounded_setting(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    unbounded = summarise([_run(impl, 1_000_000, 0) for impl in IMPLEMENTATIONS])
    work = {"count": 200_000, "size": 1024, "topic": "t", **summarise(_bimodal_runs())}
    work["prefetch"] = {"unbounded": unbounded}
    payload = {
        "repeat": 3,
        "result": {"workloads": {"1KiB": work}, "mode_gap": throughput.MODE_GAP},
    }
    text = "\n".join(throughput_section(payload, tmp_path))
    assert "### 200,000 records of 1KiB, prefetch unbounded" in text
    assert "| poll | low (< 304,959/s) | (c) ours + poll() | 2 | 150,000 |" in text
    assert "| poll | high (≥ 304,959/s) | (c) ours + poll() | 1 | 620,000 |" in text
    assert "consume | low" not in text
    rows = throughput_headline(payload)
    assert "| throughput 1KiB d/b', prefetch unbounded | ≥ 1.0 | 1.000 | **met** |" in rows
