"""The README's main command runs end to end against the cluster under test."""

from __future__ import annotations

import re

import pytest

from consumer.cli import main

pytestmark = pytest.mark.integration


def test_kgm_demo_joins_and_prints_the_full_assignment(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--bootstrap-servers", kafka_bootstrap]) == 0
    out = capsys.readouterr().out
    match = re.search(r"assignment of \S+: (.+) \(epoch (\d+)\)", out)
    assert match, out
    assert len(match.group(1).split(", ")) == 3
    assert int(match.group(2)) >= 1
    assert "left the group" in out
