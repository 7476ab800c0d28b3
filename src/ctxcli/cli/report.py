"""``ctx report``: write the HTML page of where a transcript's tokens go."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import load_config
from ctxcli.services.tokens import CountOptions


def report(
    input: Annotated[str, typer.Argument(help="Transcript file, or - for stdin.")],
    output: Annotated[
        str, typer.Option("--output", "-o", help="The HTML file to write, or - for stdout.")
    ] = "report.html",
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="ctx.toml to use.", dir_okay=False)
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset", help="Run a named stage chain (see 'ctx presets') instead of the config's."
        ),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option("--tokenizer", help="cl100k, o200k, approx or anthropic (overrides config)."),
    ] = None,
    format: Annotated[
        str | None, typer.Option("--format", help="Transcript format (default: auto-detect).")
    ] = None,
    on_invalid: Annotated[
        str,
        typer.Option(
            "--on-invalid", help="error: stop at a line that is not JSON; keep: pass it through."
        ),
    ] = "error",
) -> None:
    """Write one self-contained HTML page: where the tokens go and what each stage removed.

    The page runs the same reduction as 'ctx stats' (nothing else is written) and
    shows tokens per message, per tool and per stage, the largest removals with
    their text before and after, and the agent monitors over time. It needs no
    network to open.

    Example:

    \b
        ctx report session.jsonl -o report.html
    """
    from ctxcli.report import write_report

    with _errors():
        if on_invalid not in ("error", "keep"):
            raise CtxError(f"--on-invalid {on_invalid!r} is invalid: use 'error' or 'keep'.")
        cfg = load_config(config, preset=preset).with_overrides(tokenizer=tokenizer, format=format)
        with console.progress("counting tokens", enabled=output != "-") as bar:
            data, page = write_report(
                input,
                output,
                config=cfg,
                on_invalid=on_invalid,
                counting=CountOptions(progress=bar),
            )
        for warning in data.report.warnings:
            console.warn(warning)
        if output == "-":
            console.write_stdout(page)
        else:
            rep = data.report
            sys.stderr.write(
                f"ctx: {rep.input}: report in {output} ({len(page):,} bytes; "
                f"{rep.tokens_before:,} → {rep.tokens_after:,} tokens)\n"
            )
