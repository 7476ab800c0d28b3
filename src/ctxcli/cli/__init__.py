"""The ``ctx`` command line: the only package that imports typer or rich."""

from ctxcli.cli.app import app, main

__all__ = ["app", "main"]
