"""Run the ``ctx`` CLI in process, the way CI does."""

from __future__ import annotations

import traceback
from typing import Any

from typer.testing import CliRunner


def invoke(args: list[str], *, code: int = 0, input: bytes | str | None = None) -> Any:
    """Run the CLI like CI does; assert the exit code and show both streams on failure."""
    from ctxcli.cli import app

    runner = CliRunner()
    result = runner.invoke(app, args, input=input, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        traceback.print_exception(result.exception)
        raise result.exception
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result
