"""MkDocs hook: one API reference page per public module, generated at build time.

A module is public when no part of its dotted name starts with ``_`` and it is either a package
(``consumer``, ``consumer.testing``, ``consumer.spark``, ...) or a top-level module of ``consumer``
that declares ``__all__`` (``consumer.config``, ``consumer.errors``). Each page holds one
mkdocstrings directive, which renders exactly the names of the module's ``__all__`` (the
``filters: public`` option), so a new public name or a new public package needs no edit here.
The pages live at ``reference/API/<module>.md``; ``tests/docs`` checks them against ``__all__``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "consumer"
API_DIR = "reference/API"


def _declares_all(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def public_modules(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Dotted names of the public modules, sorted."""
    root = package_dir.name
    names = [root]
    for init in package_dir.rglob("__init__.py"):
        parts = init.parent.relative_to(package_dir).parts
        if parts and not any(part.startswith("_") for part in parts):
            names.append(".".join((root, *parts)))
    for module in package_dir.glob("*.py"):
        if not module.name.startswith("_") and _declares_all(module):
            names.append(f"{root}.{module.stem}")
    return sorted(names)


def page_text(module: str) -> str:
    """The Markdown of ``module``'s reference page."""
    return f"# `{module}`\n\n::: {module}\n    options:\n      show_root_heading: false\n"


def on_files(files: Files, config: Any) -> Files:
    """Add the generated reference pages to the site."""
    for module in public_modules():
        files.append(File.generated(config, f"{API_DIR}/{module}.md", content=page_text(module)))
    return files
