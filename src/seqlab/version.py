"""seqlab's version, importable without importing the package's modules (equal to pyproject.toml's)."""

__version__ = "0.1.0"
RUN_FORMAT_VERSION = 1        # of run directories: config.json and the checkpoints
