"""Small formatting helpers shared by the report sections of ``docs/benchmarks.md``."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt", "pyplot", "value_range", "verdict"]


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fmt(value: float | None, digits: int = 2) -> str:
    """``value`` with thousands separators, or ``n/a`` for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def value_range(stats: dict[str, Any], digits: int = 2, scale: float = 1.0) -> str:
    """``min–max`` of a :func:`benchmarks.common.summary`."""
    return f"{fmt(stats['min'] * scale, digits)}–{fmt(stats['max'] * scale, digits)}"


def verdict(ok: bool) -> str:
    """The targets table's verdict cell."""
    return "**met**" if ok else "**missed**"
