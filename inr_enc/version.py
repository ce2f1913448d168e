"""The package version (pyproject.toml's), importable from every layer."""

__version__ = "0.4.0"
