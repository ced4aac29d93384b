"""The documentation site builds with zero warnings, and its API reference covers every public name.

The site is built once per module with ``mkdocs build --strict`` (warnings, broken internal links
and missing anchors are errors). The list of public modules is found here independently of the
docs hook that generates the reference pages: every package under ``consumer/`` without a
``_``-prefixed part, and each top-level ``consumer.<name>`` module that declares ``__all__``.
Each name of each such module's ``__all__`` must have its anchor (``id="<module>.<name>"``) on
the module's page.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import consumer
from consumer._version import __version__

pytest.importorskip("mkdocs", reason="the docs extra is not installed")

ROOT = Path(__file__).resolve().parents[2]


def _public_modules() -> list[str]:
    found = ["consumer"]
    for info in pkgutil.walk_packages(consumer.__path__, prefix="consumer."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts):
            continue
        top_level_api = len(parts) == 2 and hasattr(importlib.import_module(info.name), "__all__")
        if info.ispkg or top_level_api:
            found.append(info.name)
    return sorted(found)


PUBLIC_MODULES = _public_modules()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=240,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert warnings == [], "\n".join(warnings)
    return out


def test_the_expected_public_modules_are_found() -> None:
    for module in ("consumer", "consumer.testing", "consumer.spark"):
        assert module in PUBLIC_MODULES


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_reference_page_lists_every_name_of_all(site: Path, module: str) -> None:
    page = site / "reference" / "API" / module / "index.html"
    assert page.is_file(), f"no API reference page for {module}"
    html = page.read_text(encoding="utf-8")
    names = list(importlib.import_module(module).__all__)
    assert names, f"{module}.__all__ is empty"
    missing = [name for name in names if f'id="{module}.{name}"' not in html]
    assert missing == [], f"{module}: names of __all__ missing from {page}"


def test_reference_pages_are_only_for_public_modules(site: Path) -> None:
    pages = {p.name for p in (site / "reference" / "API").iterdir() if p.is_dir()}
    assert pages == set(PUBLIC_MODULES)


def test_site_shows_the_package_version(site: Path) -> None:
    html = (site / "index.html").read_text(encoding="utf-8")
    assert re.search(rf"kafka-group-member {re.escape(__version__)}\b", html)


def test_search_index_is_built(site: Path) -> None:
    assert (site / "search" / "search_index.json").is_file()


def test_reference_pages_show_no_raw_restructuredtext(site: Path) -> None:
    raw = re.compile(r":(class|func|meth|mod|attr|exc|data):`|<p>::</p>|\w::</p>")
    for page in sorted((site / "reference" / "API").glob("*/index.html")):
        found = raw.search(page.read_text(encoding="utf-8"))
        assert found is None, f"{page.parent.name}: raw reST {found.group(0)!r}"
