"""Process entry point: Ctrl-C at any moment, start-up included, ends with exit 130."""

from __future__ import annotations

import signal
import sys


def main() -> None:
    """Run the ``ctx`` command; exit 130 on Ctrl-C at any moment, without a traceback.

    A bare ``ctx --version`` is answered before the CLI (typer, pydantic, every stage and
    format) is imported, and so is ``ctx hooks run EVENT`` (Claude Code runs it on every
    tool call: a pass-through must stay fast). SIGINT is held back while the CLI's modules import: an interrupt
    landing inside a C extension's initialisation can crash the interpreter (seen: exit
    -11) instead of raising KeyboardInterrupt. A Ctrl-C pressed meanwhile is delivered as
    soon as the imports are done, and handled like any other.
    """
    try:
        if sys.argv[1:] == ["--version"]:
            from ctxcli._version import __version__

            sys.stdout.write(f"ctx {__version__}\n")
            return
        if len(sys.argv) == 4 and sys.argv[1:3] == ["hooks", "run"]:
            from ctxcli.hooks.runner import EVENTS
            from ctxcli.hooks.runner import main as hook_main

            if sys.argv[3] in EVENTS:
                sys.exit(hook_main(sys.argv[3]))
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            from ctxcli.cli import main as cli_main
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("ctx: error: interrupted\n")
        sys.exit(130)
