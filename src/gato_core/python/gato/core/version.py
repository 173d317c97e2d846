"""The package version (one place: ``gato.__version__``, solver-cache and replay metadata)."""

__version__ = "0.1.0"
