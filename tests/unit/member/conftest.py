"""Records every rules-table row that fires during the member unit tests.

``test_rules_coverage.py`` runs last (see :func:`pytest_collection_modifyitems`) and fails on any
row of :data:`consumer.member.rules.RULES` that no test of this folder reached.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumer.member.machine import Rule, StateCell

#: Keys of the rows fired so far in this session, and how many member tests ran.
FIRED: set[str] = set()
RAN: list[str] = []


@pytest.fixture(autouse=True)
def _record_fired_rules(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    enter = StateCell.enter

    def recording_enter(self: StateCell, rule: Rule) -> None:  # type: ignore[type-arg]
        FIRED.add(rule.key)
        enter(self, rule)

    monkeypatch.setattr(StateCell, "enter", recording_enter)
    yield
    RAN.append(request.node.nodeid)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    last = [item for item in items if item.path.name == "test_rules_coverage.py"]
    items[:] = [item for item in items if item not in last] + last
