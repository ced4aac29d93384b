"""Member processes of the reliability tier (each runs ``tests/member_process.py``; a
:class:`~tests.member_process.MemberView` reads what it writes)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from consumer.testing.timeline_events import wall_clock_ms
from tests.member_process import MemberView, spawn


class MemberProcess:
    """One incarnation of a member (``slot`` = its proxy's name) running ``member_process.py``."""

    def __init__(self, slot: str, name: str, workdir: Path, spec: dict[str, Any]) -> None:
        self.slot = slot
        self.name = name
        self.file = workdir / f"{name}.jsonl"
        self.stderr_path = workdir / f"{name}.stderr"
        self.view = MemberView(self.file, name)
        self.process = spawn({**spec, "name": name, "file": str(self.file)}, self.stderr_path)
        self.killed_at_ms: int | None = None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def refresh(self) -> MemberView:
        self.view.refresh()
        return self.view

    def signal(self, sig: int) -> int:
        at = wall_clock_ms()
        os.kill(self.process.pid, sig)
        return at

    def kill(self) -> int:
        at = self.signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.killed_at_ms = at
        return at

    def leave(self, timeout_s: float = 30.0) -> int:
        """SIGTERM: the member stops polling and closes (revoke with commit, leave heartbeat)."""
        at = self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not close within {timeout_s} s") from None
        return at

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def ensure_dead(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)
