"""``kgm demo``'s narration without a broker: lines in time order, the coordinator's view as
lines, the timeline kept (and how to draw it) when matplotlib is missing, and plain help."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from consumer._group_admin.model import AssignedPartition, GroupDescription, MemberView
from consumer.cli import build_parser, main
from consumer.demo import _draw
from consumer.demo.narration import CoordinatorView, Narrator
from consumer.testing.timeline import Timeline


def test_lines_print_in_the_order_of_their_times_not_of_their_arrival(
    capsys: pytest.CaptureFixture[str],
) -> None:
    narrator = Narrator()
    narrator.t0_ms = 1_000_000
    narrator.say("member-2", "second", at_ms=1_000_500)
    narrator.say("coordinator", "first", at_ms=1_000_250)
    narrator.say("member-1", "third", at_ms=1_000_750)
    narrator.note("a note comes after every line held so far")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in lines[:3]] == ["first", "second", "third"]
    assert lines[0].startswith("  0.25s  coordinator")
    assert lines[3] == "a note comes after every line held so far"


def _member(member_id: str, name: str, owns: list[int], target: list[int]) -> MemberView:
    return MemberView(
        member_id=member_id,
        instance_id=None,
        client_id=name,
        host="/127.0.0.1",
        rack=None,
        member_epoch=3,
        assignment=tuple(AssignedPartition("t", p) for p in owns),
        target_assignment=tuple(AssignedPartition("t", p) for p in target),
    )


def _group(epoch: int, *members: MemberView) -> GroupDescription:
    return GroupDescription("g", "consumer", "Reconciling", epoch, epoch, "uniform", members, ())


def test_the_coordinator_view_says_what_changed_per_member(
    capsys: pytest.CaptureFixture[str],
) -> None:
    narrator = Narrator()
    view = CoordinatorView("127.0.0.1:1", "g", narrator)  # not started: fed by hand
    one = _member("AAAAAAAAxxxxxxxxxxxxxx", "member-1", [0, 1, 2], [0, 1])
    two = _member("BBBBBBBByyyyyyyyyyyyyy", "member-2", [], [2])
    view.show(_group(4, one, two), narrator.t0_ms)
    view.show(_group(4, one, two), narrator.t0_ms + 1)  # nothing changed: nothing said
    view.show(_group(5, two), narrator.t0_ms + 2)
    narrator.stop()
    said = [line.split(None, 2)[2] for line in capsys.readouterr().out.splitlines()]
    assert said == [
        "group epoch 4",
        "member-1 (AAAAAAAA)           reconciling e=3   owns=[0,1,2] target=[0,1]",
        "member-2 (BBBBBBBB)           reconciling e=3   owns=[] target=[2]",
        "group epoch 5",
        "member-1 (AAAAAAAA)           left the group",
    ]


def test_without_matplotlib_the_timeline_is_kept_and_the_demo_says_how_to_draw_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib... raises
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    timeline = Timeline()
    timeline.state("member-1", "JOINING", at_ms=1_000)
    timeline.assigned("member-1", "t", 0, at_ms=1_100)
    _draw(timeline, tmp_path, Narrator())
    out = capsys.readouterr().out
    events = tmp_path / "timeline.jsonl"
    assert f"kgm timeline plot {events}" in out
    assert "pip install 'kafka-group-member[demo]'" in out
    assert not (tmp_path / "timeline.png").exists()
    assert Timeline().merge_jsonl(events) == 2


def test_help_is_plain_text_with_a_description_per_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # an 80-column terminal
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "``" not in top
    assert "kgm demo" in top
    parser = build_parser()
    for command in ("demo", "broker", "group", "timeline"):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        text = capsys.readouterr().out
        description = text.split("\n\n")[1]
        assert not description.startswith(("options:", "positional")), (command, text)
        assert all(len(line) <= 80 for line in text.splitlines()), (command, text)


def test_demo_refuses_fewer_records_than_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--records", "5"])
    assert "--records takes a whole number of at least 6, got '5'" in capsys.readouterr().err
