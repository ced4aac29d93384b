"""Every docstring example written as ``>>>`` in ``consumer/`` runs as a doctest.

Modules are found by their text, so an example added anywhere is picked up; a module whose examples
need an optional extra (pyspark) is imported only when it has examples.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "consumer"


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_some_examples_exist() -> None:
    assert MODULES, "no docstring examples found: the search is broken"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} mentions '>>> ' but has no runnable example"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
