"""Process entry point: catches Ctrl-C even while the CLI is still importing."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``ctx`` command; exit 130 on Ctrl-C at any moment, without a traceback."""
    try:
        if sys.argv[1:] == ["--version"]:
            # Answered before the CLI (typer, pydantic, every stage and format) is
            # imported: 190 ms of imports for one line. Same output as the option.
            from ctxcli._version import __version__

            sys.stdout.write(f"ctx {__version__}\n")
            return
        from ctxcli.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("ctx: error: interrupted\n")
        sys.exit(130)
