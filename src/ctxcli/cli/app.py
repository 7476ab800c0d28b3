"""The ``ctx`` command: the Typer app and its commands, one module per command group.

Each command parses its arguments, makes one library call, renders the result and maps
errors to exit codes (``cli/boundary.py``). Start-up: what only some commands need
(remote storage, the report package, validation, batches of files) is imported in those
commands, so ``ctx stats --json`` of one file loads none of it (tests/project/test_layering.py
keeps it so).
"""

from __future__ import annotations

from typing import Annotated

import typer
import typer.core

from ctxcli._version import __version__
from ctxcli.cli import cost as cli_cost
from ctxcli.cli import info as cli_info
from ctxcli.cli import mcp as cli_mcp
from ctxcli.cli import proxy as cli_proxy
from ctxcli.cli import report as cli_report
from ctxcli.cli import wrap as cli_wrap
from ctxcli.cli.config import config_app
from ctxcli.cli.doctor import doctor
from ctxcli.cli.help import CtxGroup
from ctxcli.cli.hooks import hooks_app
from ctxcli.cli.reduce import reduce
from ctxcli.cli.restore import restore
from ctxcli.cli.sessions import sessions
from ctxcli.cli.stats import stats
from ctxcli.cli.uncompact import uncompact
from ctxcli.cli.validate import validate

__all__ = ["app", "main"]

app = typer.Typer(
    name="ctx",
    cls=CtxGroup,
    help="Shrink LLM-agent transcripts losslessly: reduce, preview and restore.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# The order of `ctx --help`, panel by panel (cli/help.py lists them).
app.command(rich_help_panel="Core")(reduce)
app.command(rich_help_panel="Core")(stats)
app.command(rich_help_panel="Core")(restore)
app.command(rich_help_panel="Core")(validate)
app.command(rich_help_panel="Core")(cli_report.report)
app.command(rich_help_panel="Sessions")(sessions)
app.command(rich_help_panel="Sessions")(doctor)
app.command(rich_help_panel="Sessions")(cli_cost.cost)
app.command(rich_help_panel="Sessions")(uncompact)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ctx {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Shrink LLM-agent transcripts losslessly: reduce, preview and restore."""


app.command(rich_help_panel="Live")(cli_proxy.proxy)
app.command(rich_help_panel="Live")(cli_wrap.wrap)
app.command(rich_help_panel="Live")(cli_mcp.mcp)
app.command(rich_help_panel="Config")(cli_info.stages)
app.command(rich_help_panel="Config")(cli_info.presets)
app.command(rich_help_panel="Config")(cli_info.init)
app.add_typer(config_app, rich_help_panel="Config")
app.add_typer(hooks_app, rich_help_panel="Live")


def main() -> None:
    """Console-script entry point."""
    app()
