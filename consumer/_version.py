"""The package version (kept in one place, importable without importing the package's API)."""

__version__ = "0.1.0"
