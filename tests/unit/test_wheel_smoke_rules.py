"""The wheel smoke test's reading of a wheel: which extras it tests, and the ``testing`` extra
without a pytest plugin is a failure, not a skip (``tests/packaging/wheel_smoke.py``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.packaging.wheel_smoke import SmokeError, extras_to_test, read_wheel


def _wheel(folder: Path, extras: list[str], entry_points: str | None) -> Path:
    path = folder / "kafka_group_member-9.8.7-py3-none-any.whl"
    metadata = "Metadata-Version: 2.4\nName: kafka-group-member\nVersion: 9.8.7\n"
    metadata += "".join(f"Provides-Extra: {extra}\n" for extra in extras)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("kafka_group_member-9.8.7.dist-info/METADATA", metadata)
        if entry_points is not None:
            archive.writestr("kafka_group_member-9.8.7.dist-info/entry_points.txt", entry_points)
    return path


def test_reads_version_extras_and_pytest_plugins(tmp_path: Path) -> None:
    entry_points = "[console_scripts]\nkgm = consumer.cli:main\n\n[pytest11]\nkgm = consumer.p\n"
    _wheel(tmp_path, ["dev", "spark", "testing"], entry_points)
    facts = read_wheel(tmp_path)
    assert facts.version == "9.8.7"
    assert facts.extras == {"dev", "spark", "testing"}
    assert facts.pytest_plugins == ("kgm",)
    assert extras_to_test(facts, None) == ["none", "spark", "testing"]
    assert extras_to_test(facts, ["spark"]) == ["spark"]


def test_only_documented_extras_are_tested(tmp_path: Path) -> None:
    _wheel(tmp_path, ["dev", "docs", "bench"], "[console_scripts]\nkgm = consumer.cli:main\n")
    assert extras_to_test(read_wheel(tmp_path), None) == ["none"]


def test_testing_extra_without_plugin_fails(tmp_path: Path) -> None:
    _wheel(tmp_path, ["testing"], "[console_scripts]\nkgm = consumer.cli:main\n")
    with pytest.raises(SmokeError, match="no pytest11 entry point"):
        extras_to_test(read_wheel(tmp_path), None)


def test_unknown_extra_asked_for_fails(tmp_path: Path) -> None:
    _wheel(tmp_path, ["spark"], None)
    with pytest.raises(SmokeError, match="offers"):
        extras_to_test(read_wheel(tmp_path), ["testing"])


def test_exactly_one_wheel(tmp_path: Path) -> None:
    with pytest.raises(SmokeError, match="exactly one wheel"):
        read_wheel(tmp_path)
