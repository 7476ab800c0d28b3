"""The one error boundary: library errors become one line on stderr and an exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from ctxcli.cli import console
from ctxcli.core.errors import CtxError, ExitCode, Remedy

__all__ = ["REMEDIES", "errors", "message"]

# The library's remedies in terms of this command line's flags.
REMEDIES = {
    Remedy.OTHER_OFFLOAD_DIR: "choose another --offload-dir or pass --force to replace it",
    Remedy.NAME_OFFLOAD_DIR: "pass the directory that ctx reduce wrote with --offload-dir",
    Remedy.KEEP_INVALID: "fix the line or pass --on-invalid keep",
    Remedy.NAME_FORMAT: "pass --format with one of the formats above",
    Remedy.CHECK_FORMAT: "check --format (or leave it out to auto-detect)",
    Remedy.OUTPUT_DIRECTORY: "with several inputs, -o must name a directory",
    Remedy.FORCE_IN_USE: "quit its client first, or pass --force if it is not running",
    Remedy.ALLOW_EMPTY: "name a file or a directory that holds some, or pass --allow-empty",
    Remedy.PICK_TRAJECTORY: "pick one with --trajectory N (1 for the first) or --trajectory ID",
    Remedy.NAME_CONFIG: "if you trust the file, name it with -c (or CTX_CONFIG) to use it",
}


def message(exc: CtxError) -> str:
    """The one line the CLI prints for a library error: its remedy worded with flags."""
    if exc.remedy is None or exc.remedy not in REMEDIES:
        return str(exc)
    problem = str(exc)[: -len(f"; {exc.remedy.value}.")]
    return f"{problem}; {REMEDIES[exc.remedy]}."


@contextmanager
def errors() -> Iterator[None]:
    """Turn library errors into one line on stderr and the right exit code."""
    try:
        yield
    except CtxError as exc:
        console.error(message(exc))
        raise typer.Exit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        console.error("interrupted")
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BrokenPipeError:
        # The reader went away (`| head`): end quietly, as a process killed by SIGPIPE.
        _silence_stdout()
        raise typer.Exit(int(ExitCode.BROKEN_PIPE)) from None
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except OSError as exc:
        # The environment, not ctx: permissions, a read-only or full disk, a file size
        # limit, a closed stdout.
        where = exc.filename if exc.filename is not None else "ctx"
        console.error(f"{where}: {exc.strerror or exc}")
        raise typer.Exit(int(ExitCode.USAGE_ERROR)) from None
    except Exception as exc:  # the one place that catches everything
        console.error(
            f"internal error: {type(exc).__name__}: {exc}. This is a bug in ctx: please "
            "report it with the command you ran (CTX_DEBUG=1 prints the traceback)."
        )
        if os.environ.get("CTX_DEBUG"):
            import traceback

            sys.stderr.write(console.redact("".join(traceback.format_exc())))
        raise typer.Exit(int(ExitCode.INTERNAL_ERROR)) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
