"""Every row of the share rules table is reached by some unit test of the share core.

The rows fired by the other tests of this folder are recorded by ``conftest.py``; this module runs
after them. It needs the whole folder in the same session: run alone, it skips.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from share_rig import FIRED, RAN

from consumer.share import SHARE_RULES

HERE = Path(__file__).parent


def _ensure_folder_ran() -> None:
    others = {p.name for p in HERE.glob("test_*.py") if p.name != Path(__file__).name}
    if not {Path(nodeid.split("::")[0]).name for nodeid in RAN} >= others:
        pytest.skip("counts only when every test module of tests/unit/share ran in this session")


@pytest.mark.parametrize("key", [row.key for row in SHARE_RULES.rows])
def test_every_share_rule_is_reached_by_a_unit_test(key: str) -> None:
    _ensure_folder_ran()
    assert key in FIRED, f"no unit test of the share core fires the rule {key}"
