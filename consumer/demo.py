"""The README's main job (placeholder until the wire layer lands)."""

from __future__ import annotations


def run_demo(bootstrap_servers: str | None = None) -> int:
    """Start (or use) a broker, join a group at the wire level and print the assignment."""
    raise NotImplementedError
