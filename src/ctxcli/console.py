"""The two consoles: stdout for the payload only, stderr for everything else."""

from __future__ import annotations

import os
import sys
from typing import Any


def err_console() -> Any:
    """A Rich console on the current stderr (looked up at call time, so tests capture it)."""
    from rich.console import Console

    # NO_COLOR (no-color.org): Rich alone drops colours but keeps bold and italics;
    # someone who sets it wants plain text. Without a TTY Rich writes no escapes anyway.
    plain = bool(os.environ.get("NO_COLOR"))
    return Console(
        file=sys.stderr,
        highlight=False,
        soft_wrap=False,
        color_system=None if plain else "auto",
    )


def warn(message: str) -> None:
    """Print one warning line to stderr."""
    sys.stderr.write(f"ctx: warning: {message}\n")


def error(message: str) -> None:
    """Print one error line per message line to stderr."""
    for line in message.splitlines() or [""]:
        sys.stderr.write(f"ctx: error: {line}\n")


def write_stdout(data: bytes) -> None:
    """Write the payload to stdout as bytes."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
