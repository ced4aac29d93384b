"""Same seed, same scenario: the same timeline byte for byte, whatever the process's hash seed
(no set or dict order of the interpreter leaks into a simulated run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import hashlib
from consumer.testing.sim import CASE_STUDIES, GroupSim
from consumer.testing.sim.steps import crash, fence, join, produce, stall, until_stable, wait

sim = GroupSim({"orders": 6}, seed=11, session_timeout_ms=10_000,
               config={"max.poll.interval.ms": 20_000})
result = sim.run([join("a"), join("b"), produce("orders", "x", count=20), until_stable(),
                  join("c"), wait(3_000), crash("b"), until_stable(), fence("c"),
                  stall("a", 25_000), until_stable(), produce("orders", "y", count=10),
                  wait(3_000)])
text = result.timeline_jsonl() + "".join(c.run(seed=3).timeline_jsonl() for c in CASE_STUDIES)
print(len(text.splitlines()), hashlib.sha256(text.encode()).hexdigest())
"""


def _run(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_timeline_does_not_depend_on_the_interpreters_hash_seed() -> None:
    outputs = {_run(seed) for seed in ("1", "2", "3")}
    assert len(outputs) == 1
    lines = int(next(iter(outputs)).split()[0])
    assert lines > 100
