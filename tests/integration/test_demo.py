"""``kgm demo`` runs end to end against the cluster under test and explains what it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from consumer.cli import main
from consumer.demo import LEGEND
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import StateChange

pytestmark = pytest.mark.integration

#: A member's line: time, name, its shortened member id.
MEMBER_LINE = re.compile(r"^\s*\d+\.\d\ds  (member-\d) \(([A-Za-z0-9_-]{8})\)\s+(.*)$")
#: The coordinator's line about one member.
COORDINATOR_LINE = re.compile(
    r"^\s*\d+\.\d\ds  coordinator\s+(member-\d) \(([A-Za-z0-9_-]{8})\)\s+(reconciling|in step)"
    r"\s+e=(\d+)\s+owns=(\[[\d,]*\]) target=(\[[\d,]*\])$"
)


def test_kgm_demo_explains_the_group_converging_and_draws_the_timeline(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "demo",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--records",
            "3000",
            "--output-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert LEGEND in lines, "the legend is printed before the events"
    assert lines.index(LEGEND) < next(i for i, line in enumerate(lines) if "JOINING" in line)

    member_lines = [m.groups() for line in lines if (m := MEMBER_LINE.match(line))]
    ids = {name: member_id for name, member_id, _ in member_lines}
    assert sorted(ids) == ["member-1", "member-2", "member-3"], out
    assert len(set(ids.values())) == 3, "each member has its own id"
    for name in ids:
        said = [what for who, _, what in member_lines if who == name]
        # Seen as it happens (not sampled after poll): the join, and the leave at the end.
        assert any(what.startswith("UNSUBSCRIBED -> JOINING") for what in said), (name, said)
        assert any(what.startswith("UNSUBSCRIBING -> UNSUBSCRIBED") for what in said), said
    first = [what for who, _, what in member_lines if who == "member-1"]
    assert any(re.match(r"revoked \[[\d,]+\]", what) for what in first), "member-1 hands over"

    coordinator = [m.groups() for line in lines if (m := COORDINATOR_LINE.match(line))]
    assert {(name, member_id) for name, member_id, *_ in coordinator} == set(ids.items())
    # Target vs owned: a member reconciling owns what its target does not (yet) say...
    assert any(
        state == "reconciling" and owns != target for _, _, state, _, owns, target in coordinator
    ), out
    # ...and at the end each member is in step, the 6 partitions split 2/2/2.
    last = {name: (state, owns, target) for name, _, state, _, owns, target in coordinator}
    assert all(state == "in step" and owns == target for state, owns, target in last.values())
    assert sorted(p for *_, target in last.values() for p in target.strip("[]").split(",")) == [
        str(p) for p in range(6)
    ]

    summary = re.search(
        r"group consumed (\d+) distinct records of (\d+), (\d+) more than once", out
    )
    assert summary is not None, out
    assert summary.groups() == ("3000", "3000", "0")
    per_member = [int(n) for n in re.findall(r"member-\d consumed (\d+) records", out)]
    assert len(per_member) == 3
    assert all(n > 0 for n in per_member), "every member took part"

    png = tmp_path / "timeline.png"
    assert f"drawn to {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    timeline = Timeline()
    assert timeline.merge_jsonl(tmp_path / "timeline.jsonl") > 0
    joined = {e.member for e in timeline.events() if isinstance(e, StateChange)}
    assert joined == {"member-1", "member-2", "member-3"}
