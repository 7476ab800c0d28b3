"""The version, alone, so that anything may import it without importing the package's API."""

__version__ = "0.1.0"
