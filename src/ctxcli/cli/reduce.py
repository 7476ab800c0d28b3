"""``ctx reduce``: parse, one library call, render."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Annotated

import typer

from ctxcli import api
from ctxcli.api import STDIO, Destination, RunOptions
from ctxcli.cli import batch as cli_batch
from ctxcli.cli import console
from ctxcli.cli.boundary import errors
from ctxcli.cli.dataset import check_engine, reduce_ray
from ctxcli.cli.messages import print_reduction
from ctxcli.cli.options import (
    AllowEmptyOpt,
    ColumnOpt,
    ConfigOpt,
    EngineOpt,
    FormatOpt,
    Inputs,
    JobsOpt,
    JsonOpt,
    NoCacheOpt,
    OffloadDirOpt,
    OnInvalidOpt,
    PresetOpt,
    QuietOpt,
    StrictOpt,
    TokenizerOpt,
    command_config,
    on_invalid_of,
    one_input,
)
from ctxcli.cli.sessions import LastOpt, LiveSecondsOpt, ProjectOpt, SessionOpt, session_input
from ctxcli.core.errors import DEFAULT_ON_INVALID, CtxError
from ctxcli.services.tokens.ledger import CountOptions

__all__ = ["reduce"]


def reduce(
    inputs: Inputs = None,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="PATH",
            help="Output file, or - for stdout; a directory for several inputs.",
        ),
    ] = "-",
    offload_dir: OffloadDirOpt = None,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    tokenizer: TokenizerOpt = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = DEFAULT_ON_INVALID.value,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Where the offload directory holds another transcript's record, write "
            "beside it (DIR.2) instead of stopping; change a session even if it looks in use. "
            "No record is ever replaced.",
        ),
    ] = False,
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="Replace INPUT atomically; offload to INPUT.offload."),
    ] = False,
    no_incremental: Annotated[
        bool,
        typer.Option(
            "--no-incremental",
            help="Reduce the whole file even when it grew from the one -o was made from "
            "(the output is the same either way).",
        ),
    ] = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    strict: StrictOpt = False,
    jobs: JobsOpt = None,
    no_cache: NoCacheOpt = False,
    allow_empty: AllowEmptyOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    live_seconds: LiveSecondsOpt = 60,
    engine: EngineOpt = "local",
    column: ColumnOpt = "messages",
) -> None:
    """Reduce a transcript; write it and an offload directory holding what was removed.

    Several files or a directory go into the directory -o, each with its
    offload directory beside it; a file that fails does not stop the others.
    A Claude Code or Codex session (--session, --last, or a file under their
    session directories) reduced --in-place keeps its offload in ctx's data
    directory, and 'ctx restore --session ID --in-place' undoes every change;
    a session written to in the last --live-seconds is left alone unless --force.

    Example:

    \b
        ctx reduce session.jsonl -o reduced.jsonl
        ctx reduce sessions/ -o reduced/ --jobs 2
        ctx reduce --last --in-place --preset claude-code-resume
        ctx reduce s3://bucket/run.jsonl -o s3://bucket/out.jsonl
        ctx reduce --engine ray trajectories/ -o reduced/ --column messages
    """
    with errors():
        mode = on_invalid_of(on_invalid)
        cfg = command_config(config, tokenizer, format, preset, quiet=quiet)
        cfg = cfg.with_overrides(incremental=False) if no_incremental else cfg
        if check_engine(engine, in_place) == "ray":
            ray = (offload_dir, column, jobs)
            reduce_ray(inputs, output, cfg, *ray, view=(json, quiet))
            return
        terminal = sys.stdout is not None and sys.stdout.isatty()  # None: stdout closed
        if not in_place and output == STDIO and not json and terminal:
            raise CtxError(
                "the reduced transcript would flood the terminal (and its offload go to "
                "./ctx-offload); pass -o FILE, redirect stdout, or --in-place."
            )
        inputs = session_input(inputs, session, last, project)
        counting = CountOptions(cache=not no_cache, workers=jobs)
        run = RunOptions(
            mode,
            force,
            counting,
            live_seconds=live_seconds,
            jobs=jobs or 1,
            allow_empty=allow_empty,
        )
        if cli_batch.is_batch(inputs):
            if in_place:
                raise CtxError("--in-place takes one file; pass -o DIR for several inputs.")
            view = cli_batch.View(json, quiet, strict=strict)
            raise typer.Exit(cli_batch.reduce_batch(inputs, output, offload_dir, cfg, run, view))
        dest = _destination(output, offload_dir, in_place, json)
        with console.progress("counting tokens", enabled=not (quiet or json)) as bar:
            run = replace(run, counting=replace(counting, progress=bar))
            done = api.reduce(one_input(inputs), dest, config=cfg, options=run)
        print_reduction(done, cfg, json=json, quiet=quiet)
        code = cli_batch.strict_code([done.report], strict)
        if code:
            raise typer.Exit(code)


def _destination(output: str, offload_dir: str | None, in_place: bool, json: bool) -> Destination:
    """Where ``ctx reduce`` of one file writes: the file, stdout, or the input itself."""
    if in_place:
        return Destination(offload_dir=offload_dir, in_place=True, stream=True)
    if json and output == STDIO:
        raise CtxError("--json prints the report on stdout; pass -o FILE for the transcript.")
    # stdout is written before the offload is committed: a reader that fails leaves none;
    # a file is written as it is made, never held whole.
    write = console.write_stdout if output == STDIO else None
    return Destination(output, offload_dir, stream=True, write=write)
