"""The throughput benchmark's fetch stalls: each drain finds its stalls (gaps without a record,
librdkafka's fetch backoff), each run reports its busy rate (its time less its stalls), runs of a
call shape are compared at the same number of stalls, and the report judges the target rows by
the ratio of busy rates with the whole-run ratio beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import stalls as stalls_module
from benchmarks import throughput
from benchmarks.aio_throughput import headline as aio_headline
from benchmarks.stalls import STALL_S, StallMarks, by_stalls, run_figures
from benchmarks.throughput import IMPLEMENTATIONS, SHAPES, summarise
from benchmarks.throughput_report import throughput_headline, throughput_section


class ManualClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    manual = ManualClock()
    monkeypatch.setattr(stalls_module.time, "monotonic", manual)
    return manual


def test_a_gap_longer_than_the_stall_threshold_is_a_stall(clock: ManualClock) -> None:
    marks = StallMarks()
    for step_s in (0.0, 0.01, STALL_S, 1.0, 0.002, STALL_S + 0.001):
        clock.now_s += step_s
        marks.mark()
    assert marks.first_s == 100.0
    assert marks.stalls_s == pytest.approx([1.0, STALL_S + 0.001])
    assert marks.last_s == clock.now_s


def test_the_busy_rate_leaves_the_stalls_out(clock: ManualClock) -> None:
    marks = StallMarks()
    clock.now_s = 10.5
    marks.mark()  # first record, 0.5 s after the assignment
    clock.now_s = 12.5
    marks.mark()  # after a 2 s stall
    figures = run_figures(
        "ours-consume",
        count=3_000,
        total=3_000,
        size=100,
        start_s=9.0,
        assigned_s=10.0,
        end_s=13.0,
        marks=marks,
    )
    assert figures["records_per_s"] == pytest.approx(1_000)  # 3,000 records in 3 s
    assert figures["busy_records_per_s"] == pytest.approx(3_000)  # in 3 s less 2 s of stall
    assert figures["stalls"] == 1
    assert figures["stalled_s"] == pytest.approx(2.0)
    assert figures["assigned_s"] == pytest.approx(1.0)
    assert figures["first_record_s"] == pytest.approx(1.5)


def _run(impl: str, rate: float, stalls: int, busy: float, rep: int = 0) -> dict[str, Any]:
    return {
        "impl": impl,
        "records_per_s": rate,
        "steady_records_per_s": rate * 1.05,
        "busy_records_per_s": busy,
        "stalls": stalls,
        "thread_cpu_us_per_record": 1.5,
        "process_cpu_us_per_record": 2.5,
        "assigned_s": 0.01,
        "first_record_s": 0.1,
        "consumed": 10,
        "expected": 10,
        "repetition": rep,
    }


def _mixed_runs() -> list[dict[str, Any]]:
    """Each way's runs: (rate, stalls, busy rate)."""
    runs = {
        "confluent-assign": [(500_000, 2, 900_000)],
        "confluent-848-poll": [(380_000, 2, 800_000), (225_000, 4, 810_000)],
        "ours-poll": [(390_000, 2, 840_000), (290_000, 3, 850_000), (230_000, 4, 830_000)],
        "confluent-848-consume": [(290_000, 3, 900_000), (290_000, 3, 920_000)],
        "ours-consume": [(186_000, 5, 1_000_000), (300_000, 3, 980_000)],
    }
    return [
        _run(impl, rate, stalls, busy, rep)
        for impl in IMPLEMENTATIONS
        for rep, (rate, stalls, busy) in enumerate(runs[impl])
    ]


def test_runs_compare_with_the_base_way_at_the_same_number_of_stalls() -> None:
    table = by_stalls(_mixed_runs(), SHAPES)
    poll = table["poll"]
    assert set(poll) == {"2", "3", "4"}
    assert poll["2"]["ratios"]["ours-poll"] == pytest.approx(390_000 / 380_000)
    assert poll["2"]["ratios"]["confluent-assign"] == pytest.approx(500_000 / 380_000)
    assert poll["4"]["ratios"]["ours-poll"] == pytest.approx(230_000 / 225_000)
    # no run of the base way with 3 stalls: no ratio there
    assert poll["3"]["stats"]["ours-poll"]["n"] == 1
    assert poll["3"]["ratios"] == {}
    consume = table["consume"]
    assert consume["3"]["ratios"] == {"ours-consume": pytest.approx(300_000 / 290_000)}
    assert "ours-consume" not in consume["5"]["ratios"]


def test_the_summary_has_busy_rates_and_stall_counts() -> None:
    summary = summarise(_mixed_runs())
    assert summary["busy_stats"]["ours-consume"]["median"] == pytest.approx(990_000)
    assert summary["busy_ratios"]["d/b'"] == pytest.approx(990_000 / 910_000)
    assert summary["ratios"]["d/b'"] == pytest.approx(243_000 / 290_000)
    assert summary["stall_stats"]["ours-poll"]["median"] == 3


def test_the_report_judges_by_busy_rates_and_shows_runs_by_stalls(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    unbounded = summarise([_run(impl, 1_000_000, 0, 1_000_000) for impl in IMPLEMENTATIONS])
    work = {"count": 200_000, "size": 100, "topic": "t", **summarise(_mixed_runs())}
    work["prefetch"] = {"unbounded": unbounded}
    payload = {"repeat": 3, "result": {"workloads": {"100B": work}, "stall_s": STALL_S}}
    text = "\n".join(throughput_section(payload, tmp_path))
    assert "| poll | 4 | (c) ours + poll() | 1 | 230,000 | 230,000–230,000 | 1.02 |" in text
    assert "| consume | 5 | (d) ours + consume(500) | 1 | 186,000 | 186,000–186,000 | – |" in text
    # every unbounded run had no stall: no table for it
    unbounded_part = text.split("prefetch unbounded")[1]
    assert "Runs by number of fetch stalls" not in unbounded_part
    rows = throughput_headline(payload)
    busy, whole = 990_000 / 910_000, 243_000 / 290_000
    assert (
        f"| throughput 100B d/b' | ≥ 1.0 | {busy:.3f} (whole-run medians {whole:.3f}) | **met** |"
        in rows
    )
    assert "| throughput 100B d/b', prefetch unbounded | ≥ 1.0 | 1.000 (whole-run medians" in (
        "\n".join(rows)
    )


def test_a_result_without_stalls_is_judged_by_whole_run_medians() -> None:
    work = {"ratios": {"c/b": 0.9, "d/b": 1.1, "d/b'": 1.2, "c/a": 1.0}}
    rows = throughput_headline({"result": {"workloads": {"1KiB": work}}})
    assert "| throughput 1KiB c/b | ≥ 0.95 | 0.900; short by 0.050 | **missed** |" in rows
    aio = {"ratios": {"aio-poll/ours-poll": 0.95}, "busy_ratios": {"aio-poll/ours-poll": 0.85}}
    (row,) = aio_headline({"result": {"workloads": {"100B": aio}}})
    assert row == (
        "| AsyncConsumer throughput 100B aio-poll/ours-poll | ≥ 0.9 | 0.85 (whole-run medians "
        "0.95); short by 0.05 | **missed** |"
    )


class _Record:
    def error(self) -> None:
        return None


class _Source:
    """A consumer whose ``poll()`` returns ``records`` records, then None after a 1 s wait (on
    the manual clock); a stall of ``stall_s`` comes after the first ``pause_after`` records."""

    def __init__(self, clock: ManualClock, records: int, pause_after: int, stall_s: float) -> None:
        self._clock = clock
        self._left = records
        self._given = 0
        self._pause_after = pause_after
        self._stall_s = stall_s

    def poll(self, _timeout: float) -> _Record | None:
        if not self._left:
            self._clock.now_s += 1.0
            return None
        if self._given == self._pause_after:
            self._clock.now_s += self._stall_s
        self._left -= 1
        self._given += 1
        self._clock.now_s += 0.0001
        return _Record()


def test_a_poll_drain_sees_a_stall_among_its_last_records(clock: ManualClock) -> None:
    # 100 records, a stall before the 90th: after the last mark (record 65), before the end
    marks = StallMarks()
    count = throughput._drain_poll(_Source(clock, 100, 89, 0.9), 100, 1e12, marks)
    assert count == 100
    assert marks.stalls_s == [pytest.approx(0.9 + 35 * 0.0001)]


def test_a_drain_cut_short_by_its_deadline_adds_no_stall_at_its_end(clock: ManualClock) -> None:
    # 10 of 100 records, then a poll that waited 1 s for nothing: the deadline ends the drain
    marks = StallMarks()
    count = throughput._drain_poll(_Source(clock, 10, 100, 0.0), 100, 0.0, marks)
    assert count == 10
    assert marks.stalls_s == []
