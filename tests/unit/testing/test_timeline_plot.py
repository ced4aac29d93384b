"""Plotting timelines: the PNG, the gaps it highlights, and ``kgm timeline plot``."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from consumer.cli import main
from consumer.testing import Timeline, plot
from consumer.testing.plotting import Lane, Span, draw_lanes, ownership_gaps
from consumer.testing.timeline_events import Ownership
from consumer.testing.timeline_spans import cut_at_death, double_ownership

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk; fails unless the file is a PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _handover() -> Timeline:
    """Two members; b joins and takes partitions 2 and 3 after a 300 ms gap; b is killed."""
    t = Timeline()
    t.state("a", "JOINING", 1_000, epoch=0)
    t.epoch("a", 1, 1_100)
    for p in range(4):
        t.assigned("a", "orders", p, 1_200)
    t.callback("a", "assigned", "orders", range(4), 1_200)
    t.state("a", "STABLE", 1_250, epoch=1)
    t.state("b", "JOINING", 2_000, epoch=0)
    for p in (2, 3):
        t.revoked("a", "orders", p, 2_100)
    t.callback("a", "revoked", "orders", (2, 3), 2_100)
    for p in (2, 3):
        t.assigned("b", "orders", p, 2_400)
    t.callback("b", "assigned", "orders", (2, 3), 2_400)
    t.state("b", "STABLE", 2_450, epoch=3)
    t.fault("kill", "b", 3_000, 3_000)
    return t


def test_gaps_are_the_stretches_between_two_owners_of_a_partition() -> None:
    events = _handover().events()
    assert ownership_gaps(events, end_ms=5_000) == [
        (2_100, 2_400, "orders", 2),
        (2_100, 2_400, "orders", 3),
    ]
    # b was killed at 3000 while owning 2 and 3: from then on they have no owner.
    a_again = [Ownership("a", "orders", p, 4_000, None) for p in (2, 3)]
    cut = cut_at_death([*events, *a_again])
    assert ownership_gaps(cut, end_ms=5_000) == [
        (2_100, 2_400, "orders", 2),
        (3_000, 4_000, "orders", 2),
        (2_100, 2_400, "orders", 3),
        (3_000, 4_000, "orders", 3),
    ]
    # Before the first owner and after the last one nothing is a gap.
    assert ownership_gaps([Ownership("a", "t", 0, 10, 20)], end_ms=100) == []


def test_double_ownership_names_both_members_and_the_overlap() -> None:
    events = [
        Ownership("a", "t", 0, 0, 100),
        Ownership("b", "t", 0, 80, None),
        Ownership("a", "t", 1, 0, 50),
        Ownership("b", "t", 1, 50, None),  # a clean hand-over: no overlap
    ]
    assert double_ownership(events, end_ms=200) == [(80, 100, "t", 0, "a", "b")]


def test_plot_writes_a_png_of_plausible_size(tmp_path: Path) -> None:
    out = plot(_handover(), tmp_path / "t.png", title="hand-over")
    width, height = _png_size(out)
    assert 800 <= width <= 2_000
    assert 250 <= height <= 1_000
    assert out.stat().st_size > 20_000  # lanes, bars, labels, legend: not an empty canvas


def test_more_members_give_a_taller_figure(tmp_path: Path) -> None:
    small = _handover()
    big = _handover()
    for name in ("c", "d", "e"):
        big.state(name, "JOINING", 2_500)
    assert (
        _png_size(plot(big, tmp_path / "big.png"))[1]
        > _png_size(plot(small, tmp_path / "small.png"))[1]
    )


def test_an_empty_timeline_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no member events"):
        plot(Timeline(), tmp_path / "empty.png")


def test_missing_matplotlib_names_the_testing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in sys.modules if n.split(".")[0] == "matplotlib"] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"kafka-group-member\[testing\]"):
        plot(_handover(), tmp_path / "t.png")


def test_draw_lanes_labels_only_wide_enough_bars() -> None:
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    lanes = [Lane("m1", (Span(0, 10, "wide"), Span(10, 10.5, "narrow"))), Lane("m2", ())]
    draw_lanes(ax, lanes, label_min_width=1.0)
    texts = [text.get_text().strip() for text in ax.texts]
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert texts == ["wide"]
    assert labels == ["m1", "m2"]


def test_kgm_timeline_plot_draws_a_jsonl_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "run.jsonl"
    _handover().write_jsonl(source)
    out = tmp_path / "run-plot.png"
    assert main(["timeline", "plot", str(source), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert _png_size(out)[0] >= 800
    # Without -o the image goes next to the file.
    assert main(["timeline", "plot", str(source)]) == 0
    assert _png_size(tmp_path / "run.png")[0] >= 800


def test_kgm_timeline_plot_names_the_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bad.jsonl"
    good = '{"type": "state", "member": "a", "state": "STABLE", "at_ms": 1}'
    source.write_text(f"{good}\n{good}\n{{not json\n{good}\n")
    out = tmp_path / "bad.png"
    assert main(["timeline", "plot", str(source), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:3: not a timeline event" in err
    assert not out.exists()
    assert main(["timeline", "plot", str(tmp_path / "absent.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
