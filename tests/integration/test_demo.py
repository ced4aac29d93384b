"""The README's main command runs end to end against the cluster under test."""

from __future__ import annotations

import re

import pytest

from consumer.cli import main

pytestmark = pytest.mark.integration


def test_kgm_demo_converges_three_members_and_consumes_every_record_once(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--bootstrap-servers", kafka_bootstrap]) == 0
    out = capsys.readouterr().out
    summary = re.search(
        r"group consumed (\d+) distinct records of (\d+), (\d+) more than once", out
    )
    assert summary, out
    assert summary.group(1) == summary.group(2)
    assert summary.group(3) == "0"
    per_member = [int(n) for n in re.findall(r"member-\d consumed (\d+) records", out)]
    assert len(per_member) == 3
    assert all(n > 0 for n in per_member), "every member took part"
    assert re.search(r"member-1\s+on_revoke", out), "member-1 handed partitions over"
    assert out.count("closed (committed, revoked, left the group)") == 3
