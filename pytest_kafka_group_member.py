"""pytest entry point of kafka-group-member (``pytest11`` name ``kafka_group_member``).

The plugin itself is :mod:`consumer.testing.pytest_plugin`. This module is the part pytest
imports while it loads the plugins of every installed package, and it stays outside the
``consumer`` package on purpose: importing ``consumer`` imports ``kio``, which builds Hypothesis
strategies when Hypothesis is installed. Hypothesis's own pytest plugin warns about that (and a
``filterwarnings = error`` run then fails) if this happens before Hypothesis's plugin is loaded,
and the order in which installed plugins load is not under our control. So the real plugin is
registered from ``pytest_load_initial_conftests``, once every installed plugin is loaded and
before any option is parsed or conftest read.

It is registered under its module name, so a conftest's
``pytest_plugins = ["consumer.testing.pytest_plugin"]`` finds it already there and does not
register it twice; ``-p no:kafka_group_member`` turns the whole plugin off.
"""

from __future__ import annotations

import pytest

PLUGIN_MODULE = "consumer.testing.pytest_plugin"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    early_config.pluginmanager.import_plugin(PLUGIN_MODULE)
