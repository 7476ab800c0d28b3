"""``ctx report``: write the HTML page of where a transcript's tokens go."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ctxcli.api import Destination, RunOptions
from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.options import (
    ConfigOpt,
    FormatOpt,
    OnInvalidOpt,
    PresetOpt,
    TokenizerOpt,
    command_config,
    on_invalid_of,
)
from ctxcli.cli.sessions import LastOpt, ProjectOpt, SessionOpt, is_session_file, session_input
from ctxcli.core.errors import DEFAULT_ON_INVALID, CtxError
from ctxcli.services.tokens.ledger import CountOptions

__all__ = ["report"]


def report(
    input: Annotated[
        str | None,
        typer.Argument(help="Transcript file, or - for stdin.", show_default=False, metavar="FILE"),
    ] = None,
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", metavar="PATH", help="The HTML file to write, or - for stdout."
        ),
    ] = "report.html",
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    tokenizer: TokenizerOpt = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = DEFAULT_ON_INVALID.value,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    cost: Annotated[
        bool,
        typer.Option(
            "--cost/--no-cost",
            help="Add the cost timeline of a Claude Code session or Codex rollout "
            "(as run and with the chain live).",
        ),
    ] = True,
    trajectory: Annotated[
        str | None,
        typer.Option(
            "--trajectory",
            metavar="N|ID",
            help="In a file of several trajectories (tau-bench runs, an OpenHands "
            "output.jsonl): the one to report, by number (1 for the first) or id.",
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML page: where the tokens go and what each stage removed.

    The page runs the same reduction as 'ctx stats' (nothing else is written) and
    shows tokens per message, per tool and per stage, the largest removals with
    their text before and after, and the agent monitors over time. It needs no
    network to open.

    Example:

    \b
        ctx report session.jsonl -o report.html
        ctx report --last --preset claude-code-resume
        ctx report output.jsonl --trajectory 2
    """
    with _errors():
        mode = on_invalid_of(on_invalid)
        picked = session_input([input] if input else None, session, last, project)
        if not picked:
            raise CtxError("name a transcript file, or a session with --session/--last.")
        input = picked[0]
        cfg = command_config(config, tokenizer, format, preset)
        with console.progress("counting tokens", enabled=output != "-") as bar:
            # Imported on use: the report package is start-up time for every command.
            from ctxcli.report import write_html

            # The run the page describes: a session is reduced in place (its offload in
            # ctx's data directory), any other file to stdout.
            dest = Destination(in_place=is_session_file(input))
            options = RunOptions(mode, counting=CountOptions(progress=bar))
            data, page = write_html(
                input, output, dest, config=cfg, options=options, cost=cost, trajectory=trajectory
            )
        for warning in data.report.warnings:
            console.warn(warning)
        if output == "-":
            console.write_stdout(page)
        else:
            rep = data.report
            sys.stderr.write(
                f"ctx: {console.shown_path(rep.input)}: report in {output} ({len(page):,} bytes; "
                f"{rep.tokens_before:,} → {rep.tokens_after:,} tokens)\n"
            )
