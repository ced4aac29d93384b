"""A group member in a child process, for tests that SIGKILL a member (integration tests)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from callback_timeline import Partition

from tests.member_process import MemberView, spawn
from tests.support import selected_impl


class ChildMember:
    """A member running ``tests/member_process.py`` in its own process, killable with SIGKILL.

    The child builds its consumer with the tests' implementation selection
    (``KGM_CONSUMER_IMPL``), subscribes and consumes until killed. Its JSON-lines file
    (``events``, read through a :class:`~tests.member_process.MemberView`) holds its callbacks,
    each consumed record (written before the record counts as processed) and each successful
    commit (written after ``commit()`` returned).
    """

    def __init__(
        self,
        name: str,
        workdir: Path,
        config: Mapping[str, Any],
        topics: list[str],
        *,
        commit_mode: Literal["none", "manual"] = "none",
        batch_delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self.events = workdir / f"{name}.jsonl"
        self.stderr = workdir / f"{name}.stderr.txt"
        self.view = MemberView(self.events, name)
        spec = {
            "name": name,
            "file": str(self.events),
            "impl": selected_impl(),
            "config": dict(config),
            "topics": topics,
            "commit": "batch" if commit_mode == "manual" else "none",
            "batch": 100,
            "batch_delay_s": batch_delay_s,
            "exit_on_exception": True,
        }
        self.process = spawn(spec, self.stderr)

    def owned(self) -> set[Partition]:
        return set(self.view.refresh().owned)

    def consumed_pairs(self) -> list[tuple[int, int]]:
        return [(line["partition"], line["offset"]) for line in self.view.of_type("processed")]

    def committed(self) -> dict[int, int]:
        """Last committed offset (next offset to consume) per partition."""
        last: dict[int, int] = {}
        for line in self.view.of_type("commit"):
            last[line["partition"]] = max(line["offset"], last.get(line["partition"], -1))
        return last

    def kill(self) -> float:
        """SIGKILL the child; return the ``time.monotonic()`` just before the signal."""
        at = time.monotonic()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        return at

    def failure_text(self) -> str:
        return self.stderr.read_text(errors="replace")[-4000:] if self.stderr.exists() else ""

    def ensure_dead(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
