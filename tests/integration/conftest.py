"""Integration tier: real broker, real peers. The broker fixtures live in ``tests/conftest.py``."""
