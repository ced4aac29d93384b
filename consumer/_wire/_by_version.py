"""Picking a request's kio classes by API version (every builder's first step)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["by_version"]

T = TypeVar("T")


def by_version(api: str, version: int, choices: Mapping[int, T]) -> T:
    """``choices[version]``; ``ValueError`` naming ``api`` and the versions it supports else."""
    try:
        return choices[version]
    except KeyError:
        raise ValueError(
            f"{api} v{version} is not supported (v{min(choices)}-v{max(choices)})"
        ) from None
