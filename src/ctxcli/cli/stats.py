"""``ctx stats``: parse, one library call, render."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from ctxcli import api
from ctxcli.api import Destination, RunOptions
from ctxcli.cli import batch as cli_batch
from ctxcli.cli import console
from ctxcli.cli.boundary import errors
from ctxcli.cli.messages import print_stats
from ctxcli.cli.options import (
    AllowEmptyOpt,
    ConfigOpt,
    FormatOpt,
    Inputs,
    JobsOpt,
    JsonOpt,
    NoCacheOpt,
    OnInvalidOpt,
    PresetOpt,
    StrictOpt,
    TokenizerOpt,
    command_config,
    on_invalid_of,
    one_input,
)
from ctxcli.cli.sessions import LastOpt, ProjectOpt, SessionOpt, session_input
from ctxcli.core.errors import DEFAULT_ON_INVALID, CtxError, ExitCode
from ctxcli.pipeline.config import Config
from ctxcli.services.tokens.ledger import CountOptions

if TYPE_CHECKING:
    from ctxcli.report import ReportData

__all__ = ["stats"]


def stats(
    inputs: Inputs = None,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    tokenizer: TokenizerOpt = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = DEFAULT_ON_INVALID.value,
    json: JsonOpt = False,
    fail_over: Annotated[
        int | None,
        typer.Option(
            "--fail-over",
            metavar="TOKENS",
            help="Exit 1 if the reduced transcript has more tokens.",
        ),
    ] = None,
    strict: StrictOpt = False,
    jobs: JobsOpt = None,
    no_cache: NoCacheOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    allow_empty: AllowEmptyOpt = False,
    monitors: Annotated[
        bool,
        typer.Option(
            "--monitors",
            help="Always show the stuck-agent monitors (default: when they look stuck, "
            "as nudge_early_exit would nudge).",
        ),
    ] = False,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="PATH",
            help="The -o reduce would get (hints cite its offload directory); nothing is written.",
        ),
    ] = None,
    offload_dir: Annotated[
        str | None,
        typer.Option("--offload-dir", metavar="DIR", help="The --offload-dir reduce would get."),
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Preview an in-place reduce.")
    ] = False,
    by_tool: Annotated[
        bool, typer.Option("--by-tool", help="Also show tokens per tool, before and after.")
    ] = False,
    top: Annotated[
        int | None,
        typer.Option(
            "--top", metavar="N", min=1, help="Also show the N largest removed or shortened blocks."
        ),
    ] = None,
) -> None:
    """Preview what reduce would save, without writing anything.

    Give it the paths reduce would get (-o, --offload-dir, --in-place): the hints cite
    the offload directory, so the numbers then equal those of the file reduce writes.

    Several files or a directory give one table row per file.

    Example:

    \b
        ctx stats session.jsonl --json --fail-over 100000
        ctx stats session.jsonl --by-tool --top 5
    """
    with errors():
        mode = on_invalid_of(on_invalid)
        cfg = command_config(config, tokenizer, format, preset)
        inputs = session_input(inputs, session, last, project)
        counting = CountOptions(cache=not no_cache, workers=jobs)
        run = RunOptions(mode, counting=counting, jobs=jobs or 1, allow_empty=allow_empty)
        if cli_batch.is_batch(inputs):
            if by_tool or top:
                raise CtxError("--by-tool and --top take one file; run them file by file.")
            view = cli_batch.View(json, fail_over=fail_over, strict=strict)
            raise typer.Exit(cli_batch.stats_batch(inputs, cfg, run, view))
        source, dest = one_input(inputs), Destination(output, offload_dir, in_place=in_place)
        with console.progress("counting tokens", enabled=not json) as bar:
            run = replace(run, counting=replace(run.counting, progress=bar))
            data = _detail(source, dest, cfg, run, top) if by_tool or top else None
            report = (
                api.stats(source, dest, config=cfg, options=run) if data is None else data.report
            )
        print_stats(report, data, cfg, json=json, shown=(by_tool, bool(top), monitors))
        code = cli_batch.strict_code([report], strict)
        if code:
            raise typer.Exit(code)
        if fail_over is not None and report.tokens_after > fail_over:
            console.error(
                f"{source}: {report.tokens_after:,} tokens after reduction exceed "
                f"--fail-over {fail_over:,}."
            )
            raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _detail(
    source: str, dest: Destination, config: Config, run: RunOptions, top: int | None
) -> ReportData:
    """The breakdown ``ctx report`` shows, of the same run (the same destination)."""
    # Imported here: the report package is start-up time for every other command.
    from ctxcli.report import analyze_file

    return analyze_file(source, dest, config=config, options=run, top=top or 0)
