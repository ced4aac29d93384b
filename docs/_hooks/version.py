"""MkDocs hook: the site shows the package version from its one source, ``consumer/_version.py``,
and the repository's ``CHANGELOG.md`` as the page ``changelog.md``.

The version file is read as text (no import), so the docs build does not depend on the package's
runtime dependencies being importable.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
VERSION_FILE = ROOT / "consumer" / "_version.py"
CHANGELOG_FILE = ROOT / "CHANGELOG.md"


def read_version(path: Path = VERSION_FILE) -> str:
    """The string assigned to ``__version__`` in ``path``."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__version__" for target in node.targets
        ):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
    raise ValueError(f"{path} assigns no string to __version__")


def on_config(config: Any) -> Any:
    """Put the version in the site name and the footer."""
    version = read_version()
    config["site_name"] = f"kafka-group-member {version}"
    config["copyright"] = f"kafka-group-member {version} - Apache License 2.0"
    return config


def on_files(files: Files, config: Any) -> Files:
    """Publish the changelog kept at the repository root."""
    text = CHANGELOG_FILE.read_text(encoding="utf-8")
    files.append(File.generated(config, "changelog.md", content=text))
    return files
