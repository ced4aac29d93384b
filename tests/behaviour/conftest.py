"""Behaviour tier: every test runs on the real broker (``real``, marked ``integration``) and on
the in-memory simulation (``fake``). The broker fixtures live in ``tests/conftest.py`` and are
only requested by the ``real`` backend, so a run of the ``fake`` half starts no broker."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.behaviour.backends import Backend, FakeBackend, RealBackend

BACKENDS = [
    pytest.param("real", marks=pytest.mark.integration, id="real"),
    pytest.param("fake", id="fake"),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, unique_name: Callable[[str], str]) -> Iterator[Backend]:
    """The backend this test runs on; consumers it made are closed at teardown."""
    made: Backend
    if request.param == "real":
        made = RealBackend(
            request.getfixturevalue("kafka_bootstrap"),
            request.getfixturevalue("admin"),
            unique_name,
        )
    else:
        made = FakeBackend(seed=0)
    try:
        yield made
    finally:
        made.close()
