"""Session-wide test policy.

Under CI (``CI`` set) a skipped test fails the run: every tier, the real-broker ones included,
must actually execute there.
"""

from __future__ import annotations

import os

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get("CI"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = reporter.stats.get("skipped", [])
    if skipped and exitstatus == 0:
        reporter.write_line(f"CI policy: {len(skipped)} test(s) were skipped; failing the run.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
