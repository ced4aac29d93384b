"""The scaling section's plots take any smoke-size result: a log axis never gets only zeros (a
0.3 s window can measure no CPU tick), which matplotlib reports with a warning (an error here)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import scaling_report


def test_the_curve_leaves_a_zero_cpu_reading_off_its_log_axis(tmp_path: Path) -> None:
    rows = [
        {
            "impl": "ours",
            "members": 2,
            "partitions": 12,
            "cold-join": {"converge_s": 0.5},
            "join": {"converge_s": 0.4},
            "cost": {"cpu_pct_per_member": 0.0, "rss_mb_per_member": 3.0},
        }
    ]
    name = scaling_report._plot_curve(rows, tmp_path)
    assert (tmp_path / name).stat().st_size > 0


def test_the_headline_plots_a_run_that_timed_nothing_above_zero(tmp_path: Path) -> None:
    rows = [
        {
            "impl": "ours",
            "members": 1,
            "partitions": 4,
            "cold-join": {"converge_s": 0.0},
            "steps": [0.0],
            "step_s": {"median": 0.0},
            "rolling_total_s": 0.0,
        }
    ]
    name = scaling_report._plot_headline(rows, tmp_path)
    assert (tmp_path / name).stat().st_size > 0


def test_the_growth_plot_takes_a_capped_row_without_a_time(tmp_path: Path) -> None:
    rows = [
        {"impl": "ours", "converge_s": 4.2},
        {"impl": "classic-eager", "capped": {"timeout_s": 360.0, "error": "slow"}},
    ]
    name = scaling_report._plot_growth(rows, tmp_path)
    assert (tmp_path / name).stat().st_size > 0
