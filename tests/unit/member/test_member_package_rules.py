"""Package rules: forbidden imports, sorted exports, and the generated diagram in the docs."""

from __future__ import annotations

import ast
from pathlib import Path

import consumer.member as member_package
from consumer.member import diagram

MEMBER_DIR = Path(member_package.__file__).parent
FORBIDDEN = {"asyncio", "threading", "time", "socket", "confluent_kafka", "pyspark", "tenacity"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "random":
                found |= {f"random.{alias.name}" for alias in node.names}
    return found


def test_core_imports_no_io_clock_thread_or_global_random() -> None:
    offenders = {}
    for path in sorted(MEMBER_DIR.glob("*.py")):
        bad = {
            name
            for name in imported_modules(path)
            if name.split(".")[0] in FORBIDDEN
            or (name.startswith("random.") and name != "random.Random")
        }
        if bad:
            offenders[path.name] = bad
    assert offenders == {}


def test_random_module_is_only_used_for_the_injected_type() -> None:
    for path in MEMBER_DIR.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "random"
            ):
                assert node.attr == "Random", f"{path.name} uses random.{node.attr}"


def test_all_is_sorted_and_complete() -> None:
    exported = member_package.__all__
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(member_package, name)


def test_committed_diagram_matches_a_fresh_rendering() -> None:
    doc = diagram.DOC_PATH.read_text(encoding="utf-8")
    assert diagram.extract_block(doc) == diagram.render_block()
    assert diagram.main(["--check"]) == 0


def test_diagram_lists_every_row_that_changes_state(tmp_path: Path) -> None:
    rendered = diagram.render_mermaid()
    for row in member_package.RULES.rows:
        for source in row.sources:
            if row.target(source) is source:
                assert f"    {source.name} --> {source.name} :" not in rendered
                continue
            edge = f"{source.name} --> {row.target(source).name} : "
            line = next(line for line in rendered.splitlines() if line.strip().startswith(edge))
            assert row.outcome.name.lower() in line
    tables = diagram.render_tables()
    assert all(f"| {row.outcome.name} |" in tables for row in member_package.RULES.rows)
    stale = tmp_path / "doc.md"
    stale.write_text(f"x\n{diagram.BEGIN_MARKER}\nold\n{diagram.END_MARKER}\ny\n", encoding="utf-8")
    assert diagram.main(["--check", "--doc", str(stale)]) == 1
    assert diagram.main(["--write", "--doc", str(stale)]) == 0
    assert diagram.main(["--check", "--doc", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8").startswith("x\n")
    assert diagram.main([]) == 0


def _attribute_assignments(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for item in ast.walk(target):
                if isinstance(item, ast.Attribute):
                    names.add(item.attr)
    return names


def test_only_the_engine_assigns_a_state_or_a_round_phase() -> None:
    """The rules table decides; the engine (machine.py) is the only code that moves the state
    or a round's phase, so no module of the core sets them on its own."""
    package_dir = MEMBER_DIR.parent
    offenders = {}
    for path in sorted(package_dir.rglob("*.py")):
        if path == MEMBER_DIR / "machine.py":
            continue
        moved = _attribute_assignments(path) & {"_state", "phase", "_phase", "_index"}
        if path.parent == MEMBER_DIR:
            moved |= _attribute_assignments(path) & {"state"}
        if moved:
            offenders[str(path.relative_to(package_dir))] = moved
    assert offenders == {}
    engine = _attribute_assignments(MEMBER_DIR / "machine.py")
    assert {"_state", "current"} <= engine  # the check above looks at the right names
