"""Every benchmark runs at smoke size against the session broker and writes well-formed results.

This never asserts speed: only that every implementation ran, counts match, and no number is
NaN. The full-size run is ``python -m benchmarks --size full`` (see docs/benchmarks.md).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

# benchmarks/ is a top-level folder of the repository, not part of the installed package; plain
# `pytest` (unlike `python -m pytest`) does not put the repository root on sys.path.
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import BENCHMARKS  # noqa: E402
from benchmarks.__main__ import main  # noqa: E402

pytestmark = pytest.mark.integration


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


@pytest.fixture(scope="module")
def smoke_run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    status = main(
        [
            "--size",
            "smoke",
            "--repeat",
            "1",
            "--bootstrap",
            kafka_bootstrap,
            "--no-profile",
            "--results-dir",
            str(out / "results"),
            "--docs-dir",
            str(out / "docs"),
        ]
    )
    assert status == 0
    return out


def _result(out: Path, name: str) -> dict[str, Any]:
    payload = json.loads((out / "results" / f"{name}.json").read_text())
    assert payload["benchmark"] == name
    assert payload["size"] == "smoke"
    assert len(payload["loadavg_before"]) == 3
    assert not any(math.isnan(n) for n in _numbers(payload)), f"NaN in {name}"
    result: dict[str, Any] = payload["result"]
    return result


def test_every_result_file_and_the_doc_are_written(smoke_run: Path) -> None:
    for name in BENCHMARKS:
        assert (smoke_run / "results" / f"{name}.json").is_file()
    doc = (smoke_run / "docs" / "benchmarks.md").read_text()
    for heading in (
        "Throughput",
        "Convergence",
        "Ack latency",
        "Delivery latency",
        "Cost per member",
        "Headline",
        "Share groups",
        "AsyncConsumer throughput",
        "Headline and scaling",
    ):
        assert heading in doc
    plots = list((smoke_run / "docs" / "benchmarks").glob("*.png"))
    assert any(p.name.startswith("timeline-") for p in plots)
    for link in [line for line in doc.splitlines() if line.startswith("![")]:
        target = link.split("(", 1)[1].rstrip(")")
        assert (smoke_run / "docs" / target).is_file(), link


def test_throughput_consumed_everything_with_every_implementation(smoke_run: Path) -> None:
    from benchmarks.throughput import IMPLEMENTATIONS

    result = _result(smoke_run, "throughput")
    assert set(result["workloads"]) == {"100B", "1KiB"}
    for work in result["workloads"].values():
        assert {r["impl"] for r in work["runs"]} == set(IMPLEMENTATIONS)
        for run in work["runs"]:
            assert run["consumed"] == run["expected"] == work["count"], run
            assert run["records_per_s"] > 0
            assert run["thread_cpu_us_per_record"] > 0
            assert run["stalls"] == len(run["stalls_s"]) >= 0
            assert run["busy_records_per_s"] >= run["records_per_s"]
        assert set(work["ratios"]) == set(work["busy_ratios"]) == {"c/b", "d/b", "d/b'", "c/a"}
        assert set(work["by_stalls"]) == {"poll", "consume"}
        unbounded = work["prefetch"]["unbounded"]
        assert {r["impl"] for r in unbounded["runs"]} == set(IMPLEMENTATIONS)
        for run in unbounded["runs"]:
            assert run["consumed"] == run["expected"] == work["count"], run
            assert run["prefetch"] == "unbounded"
        assert set(unbounded["ratios"]) == {"c/b", "d/b", "d/b'", "c/a"}


def test_delivery_latency_has_every_record_of_both_implementations(smoke_run: Path) -> None:
    from benchmarks.delivery_latency import IMPLEMENTATIONS

    result = _result(smoke_run, "delivery_latency")
    for impl in IMPLEMENTATIONS:
        stats = result["stats"][impl]
        assert stats["n"] == result["samples_per_round"], (impl, stats)
        assert 0 < stats["p50"] <= stats["max"] < 30_000, (impl, stats)


def test_convergence_every_scenario_and_implementation(smoke_run: Path) -> None:
    from benchmarks.convergence import IMPLEMENTATIONS, SCENARIOS

    result = _result(smoke_run, "convergence")
    (broker,) = result["brokers"].values()
    runs = broker["runs"]
    assert {(r["impl"], r["scenario"]) for r in runs} == {
        (i, s) for i in IMPLEMENTATIONS for s in SCENARIOS
    }
    for run in runs:
        assert run["converge_s"] >= 0
        assert run["max_unowned_s"] >= 0
    for scenario in SCENARIOS:
        assert set(broker["timelines"][scenario]) == set(IMPLEMENTATIONS)


def test_ack_latency_has_samples_for_one_and_many_members(smoke_run: Path) -> None:
    result = _result(smoke_run, "ack_latency")
    assert len(result["cases"]) == 2
    for case in result["cases"].values():
        assert case["samples"] > 0
        assert case["total_ms"]["p99"] >= case["total_ms"]["p50"] >= 0


def test_member_cost_measured_every_count_and_the_core(smoke_run: Path) -> None:
    result = _result(smoke_run, "member_cost")
    (broker,) = result["brokers"].values()
    for n in result["member_counts"]:
        for impl in ("ours", "confluent-848"):
            stats = broker["stats"][f"{impl}/{n}"]
            assert stats["rss_mb"]["n"] >= 1
            assert stats["rss_mb"]["median"] > 0
    assert [row["partitions"] for row in result["microbenchmark"]] == [1, 100, 1000]
    assert all(row["us_per_heartbeat"] > 0 for row in result["microbenchmark"])


def test_share_throughput_every_record_with_both_implementations(smoke_run: Path) -> None:
    from benchmarks.share_throughput import IMPLEMENTATIONS, cases

    result = _result(smoke_run, "share")["throughput"]
    assert set(result["cases"]) == {case.key for case in cases("smoke")}
    for case in result["cases"].values():
        assert {r["impl"] for r in case["runs"]} == set(IMPLEMENTATIONS)
        for run in case["runs"]:
            assert run["consumed"] == run["expected"] == case["count"], run
            assert run["complete"], run["per_partition"]
            assert sum(run["member_records"]) == case["count"]
            assert len(run["member_records"]) == case["members"]
            assert run["records_per_s"] > 0
            assert run["first_record_s"] is not None
            assert run["first_record_s"] >= 0
        assert case["ratio"]["n"] == len(case["runs"]) // 2
        assert case["ratio"]["median"] > 0


def test_share_idle_cost_measured_for_both_implementations(smoke_run: Path) -> None:
    from benchmarks.share_member_cost import IMPLEMENTATIONS

    result = _result(smoke_run, "share")["idle_cost"]
    assert result["member_counts"] == [1]
    for n in result["member_counts"]:
        for impl in IMPLEMENTATIONS:
            stats = result["stats"][f"{impl}/{n}"]
            assert stats["cpu_pct"]["n"] >= 1
            assert stats["cpu_pct_per_member"]["min"] >= 0
            assert stats["rss_mb"]["median"] > 0
            assert stats["threads"]["median"] >= 1 + n  # the main thread and one poller each


def test_aio_throughput_consumed_everything_sync_and_async(smoke_run: Path) -> None:
    from benchmarks.aio_throughput import PAIRS, implementations

    result = _result(smoke_run, "aio_throughput")
    assert set(result["workloads"]) == {"100B"}
    for work in result["workloads"].values():
        assert {r["impl"] for r in work["runs"]} == set(implementations("smoke"))
        for run in work["runs"]:
            assert run["consumed"] == run["expected"] == work["count"], run
            assert run["records_per_s"] > 0
            assert run["busy_records_per_s"] >= run["records_per_s"]
        pairs = {f"{aio}/{sync}" for aio, sync in PAIRS.items()}
        assert set(work["ratios"]) == set(work["busy_ratios"]) == pairs
        assert all(value > 0 for value in work["ratios"].values())
        assert set(work["by_stalls"]) == {"poll", "consume"}


def test_scaling_headline_and_curve_converged_for_every_implementation(smoke_run: Path) -> None:
    from benchmarks.scaling import PLANS

    plan = PLANS["smoke"]
    result = _result(smoke_run, "scaling")
    head = result["headline"]
    assert [row["impl"] for row in head["rows"]] == list(plan.headline_impls)
    for row in head["rows"]:
        assert "capped" not in row, row
        assert row["cold-join"]["converge_s"] >= 0
        assert len(row["steps"]) == head["members"]
    rows = result["curve"]["rows"]
    assert {(r["impl"], r["members"], r["partitions"]) for r in rows} == {
        (impl, m, p) for impl in plan.curve_impls for m, p in plan.curve
    }
    for row in rows:
        assert "capped" not in row, row
        for phase in ("cold-join", "join"):
            assert row[phase]["converge_s"] >= 0, (phase, row)
        assert row["cost"]["rss_mb_per_member"] > 0
        assert row["cost"]["cpu_pct_per_member"] >= 0
    assert (smoke_run / "docs" / "benchmarks" / "scaling_curve.png").is_file()


def test_scaling_growth_gave_every_added_partition_an_owner(smoke_run: Path) -> None:
    from benchmarks.scaling import PLANS

    plan = PLANS["smoke"]
    growth = _result(smoke_run, "scaling")["growth"]
    assert (growth["members"], growth["start_partitions"], growth["added"]) == plan.growth
    assert [row["impl"] for row in growth["rows"]] == list(plan.headline_impls)
    for row in growth["rows"]:
        assert "failed" not in row, row
        assert "capped" not in row, row
        assert row["converge_s"] > 0, row
        # Every partition, old and new, ends with one owner: none stays unowned past the end.
        assert row["max_unowned_s"] <= row["converge_s"], row
    assert (smoke_run / "docs" / "benchmarks" / "scaling_growth.png").is_file()
