"""One source of the version: ``consumer/_version.py``, shown by ``kgm --version``, the package
metadata and the newest release of the CHANGELOG."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import consumer
from consumer._version import __version__
from consumer.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", __version__)
    assert consumer.__version__ == __version__


def test_kgm_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"kgm {__version__}"


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "consumer._version.__version__"}


def test_installed_metadata_matches() -> None:
    assert version("kafka-group-member") == __version__


def test_changelog_newest_release_is_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d[^\]]*)\]", text, flags=re.MULTILINE)
    assert releases, "CHANGELOG.md has no release heading '## [X.Y.Z] - YYYY-MM-DD'"
    assert releases[0] == __version__
