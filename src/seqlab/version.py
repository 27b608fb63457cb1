"""seqlab's version, importable without importing the package's modules (equal to pyproject.toml's)."""

__version__ = "0.1.0"
