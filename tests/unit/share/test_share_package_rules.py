"""Package rules of the share core: no I/O, clock or threads; sorted exports; the generated page."""

from __future__ import annotations

import ast
from pathlib import Path

import consumer.share as share_package
from consumer.member import diagram
from consumer.share import SHARE_RULES, SHARE_STATES
from consumer.share.diagram import SHARE_PAGE

SHARE_DIR = Path(share_package.__file__).parent
FORBIDDEN = {"asyncio", "threading", "time", "socket", "confluent_kafka", "pyspark", "tenacity"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_share_core_imports_no_io_clock_thread_or_kio() -> None:
    offenders = {
        path.name: bad
        for path in sorted(SHARE_DIR.glob("*.py"))
        if (bad := {m for m in _imports(path) if m.split(".")[0] in FORBIDDEN | {"kio"}})
    }
    assert offenders == {}


def test_all_is_sorted_and_complete() -> None:
    exported = share_package.__all__
    assert exported == sorted(exported)
    assert all(hasattr(share_package, name) for name in exported)


def test_every_state_has_its_columns_and_every_row_names_known_states() -> None:
    assert set(SHARE_STATES) == set(share_package.ShareState)
    for row in SHARE_RULES.rows:
        assert row.when, f"row {row.key} says nothing for the docs"
        assert all(source in SHARE_STATES for source in row.sources)


def test_the_committed_share_page_matches_a_fresh_rendering() -> None:
    doc = SHARE_PAGE.doc_path.read_text(encoding="utf-8")
    assert diagram.extract_block(doc, SHARE_PAGE) == diagram.render_block(SHARE_PAGE)
    assert diagram.main(["--check", "--page", "share"]) == 0
    assert diagram.main(["--check"]) == 0, "both pages"


def test_the_share_page_lists_every_row(tmp_path: Path) -> None:
    rendered = diagram.render_mermaid(SHARE_PAGE)
    for row in SHARE_RULES.rows:
        for source in row.sources:
            if row.target(source) is source:
                continue
            edge = f"    {source.name} --> {row.target(source).name} : "
            line = next(line for line in rendered.splitlines() if line.startswith(edge))
            assert row.outcome.name.lower() in line
    tables = diagram.render_tables(SHARE_PAGE)
    assert all(f"| {row.outcome.name} |" in tables for row in SHARE_RULES.rows)
    assert "| STOPPING | StopAndFlush | StoppedAndFlushed |" in tables
    stale = tmp_path / "share.md"
    stale.write_text(f"x\n{SHARE_PAGE.begin_marker}\nold\n{SHARE_PAGE.end_marker}\n", "utf-8")
    args = ["--page", "share", "--doc", str(stale)]
    assert diagram.main(["--check", *args]) == 1
    assert diagram.main(["--write", *args]) == 0
    assert diagram.main(["--check", *args]) == 0
    assert "RECONCILING --> ACKNOWLEDGING : round_finished" in stale.read_text("utf-8")
