"""The how-to's example (examples/user_project, docs/howto/testing-your-listeners.md) does what
the page says: its test fails on the buggy listener and passes on the fixed one, in well under a
second, with the same outcome every time."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

PROJECT = Path(__file__).resolve().parents[3] / "examples" / "user_project"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example() -> Iterator[tuple[ModuleType, ModuleType]]:
    """The example's ``listeners`` module and its test module (as pytest would import them)."""
    saved = sys.modules.get("listeners")
    listeners = _load("listeners", PROJECT / "listeners.py")
    test_module = _load("example_test_listener_bug", PROJECT / "tests" / "test_listener_bug.py")
    yield listeners, test_module
    sys.modules.pop("example_test_listener_bug", None)
    if saved is None:
        sys.modules.pop("listeners", None)
    else:
        sys.modules["listeners"] = saved


def test_the_example_test_fails_on_the_buggy_listener_and_passes_on_the_fixed_one(
    example: tuple[ModuleType, ModuleType],
) -> None:
    listeners, test_module = example
    started = time.monotonic()
    with pytest.raises(AssertionError, match="unexplained_duplicate"):
        test_module.check_no_record_processed_twice(listeners.BuggyOffsetsListener)
    buggy_s = time.monotonic() - started
    started = time.monotonic()
    test_module.check_no_record_processed_twice(listeners.OffsetsListener)
    fixed_s = time.monotonic() - started
    assert buggy_s < 1.0
    assert fixed_s < 1.0


def test_the_example_gives_the_same_result_ten_times_in_a_row(
    example: tuple[ModuleType, ModuleType],
) -> None:
    listeners, test_module = example
    for listener in (listeners.BuggyOffsetsListener, listeners.OffsetsListener):
        runs = [test_module.run_group(listener) for _ in range(10)]
        summaries = {run.report.summary() for run in runs}
        timelines = {run.timeline_jsonl() for run in runs}
        assert len(summaries) == 1
        assert len(timelines) == 1
    buggy = test_module.run_group(listeners.BuggyOffsetsListener).report
    assert buggy.duplicates > 0
    assert buggy.invariants_broken() == {"unexplained_duplicate"}
