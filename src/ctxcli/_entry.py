"""Process entry point: catches Ctrl-C even while the CLI is still importing."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``ctx`` command; exit 130 on Ctrl-C at any moment, without a traceback."""
    try:
        from ctxcli.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("ctx: error: interrupted\n")
        sys.exit(130)
