"""Records every share rules-table row that fires during the share core's unit tests.

``test_share_rules_coverage.py`` runs last (see :func:`pytest_collection_modifyitems`) and fails
on any row of :data:`consumer.share.rules.SHARE_RULES` that no test of this folder reached.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from share_rig import FIRED, RAN

from consumer.member.machine import Rule, StateCell
from consumer.share.states import ShareState


@pytest.fixture(autouse=True)
def _record_fired_share_rules(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    enter = StateCell.enter

    def recording_enter(self: StateCell, rule: Rule) -> None:  # type: ignore[type-arg]
        if isinstance(rule.sources[0], ShareState):
            FIRED.add(rule.key)
        enter(self, rule)

    monkeypatch.setattr(StateCell, "enter", recording_enter)
    yield
    RAN.append(request.node.nodeid)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    last = [item for item in items if item.path.name == "test_share_rules_coverage.py"]
    items[:] = [item for item in items if item not in last] + last
