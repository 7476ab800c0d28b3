"""``ctx restore``: parse, one library call, render."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer

from ctxcli import api
from ctxcli.api import STDIO, Destination, RunOptions
from ctxcli.cli import batch as cli_batch
from ctxcli.cli import console
from ctxcli.cli.boundary import errors
from ctxcli.cli.dataset import check_engine, restore_ray
from ctxcli.cli.messages import print_restored
from ctxcli.cli.options import (
    AllowEmptyOpt,
    ColumnOpt,
    EngineOpt,
    Inputs,
    JobsOpt,
    JsonOpt,
    QuietOpt,
    one_input,
)
from ctxcli.cli.payload import restored_entry
from ctxcli.cli.sessions import LastOpt, LiveSecondsOpt, ProjectOpt, SessionOpt, session_input
from ctxcli.core.errors import CtxError

__all__ = ["restore"]


def restore(
    inputs: Inputs = None,
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", metavar="PATH", help="Where to write the original, or - for stdout."
        ),
    ] = "-",
    offload_dir: Annotated[
        str | None,
        typer.Option(
            "--offload-dir",
            metavar="DIR",
            help="The offload directory (default: REDUCED.offload, its later siblings, "
            "and the reductions ctx recorded on this machine).",
        ),
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Replace REDUCED by its original, atomically.")
    ] = False,
    quiet: QuietOpt = False,
    allow_empty: AllowEmptyOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Restore a session even if it looks in use.")
    ] = False,
    live_seconds: LiveSecondsOpt = 60,
    engine: EngineOpt = "local",
    column: ColumnOpt = "messages",
    jobs: JobsOpt = None,
    json: JsonOpt = False,
) -> None:
    """Rebuild the original transcript byte-for-byte from a reduced one.

    A file or session reduced several times (reduce --in-place, doctor --fix) is restored
    through every reduction; lines a client appended after the reduction (a resumed
    session) are kept at the end. Several files or a directory go into the directory -o
    (or back in place), like reduce.

    Example:

    \b
        ctx restore reduced.jsonl -o original.jsonl
        ctx restore reduced/ -o originals/
        ctx restore --session 4d5611e5 --in-place
        ctx restore --engine ray reduced/ -o original/ --offload-dir r.offload
        ctx restore reduced.jsonl -o original.jsonl --json
    """
    with errors():
        picked = session_input(inputs, session, last, project)
        if json and output == STDIO and not in_place:
            raise CtxError("--json prints on stdout, where the original would go; pass -o FILE.")
        if check_engine(engine) == "ray":
            source = one_input(picked)
            restore_ray(source, output, offload_dir=offload_dir, column=column, jobs=jobs)
            return
        run = RunOptions(force=force, live_seconds=live_seconds, allow_empty=allow_empty)
        if cli_batch.is_batch(picked):
            view = cli_batch.View(json, quiet=quiet)
            raise typer.Exit(cli_batch.restore_batch(picked, output, in_place, run, view))
        reduced = one_input(picked)
        if in_place and output not in (STDIO, reduced):
            raise CtxError("--in-place and -o cannot be combined; pick one.")
        dest = Destination(None if in_place else output, offload_dir, in_place=in_place)
        restored = api.restore(reduced, dest, options=run)
        if output == STDIO and not in_place:
            console.write_stdout(restored.data)
        if json:
            entry = restored_entry(reduced, reduced if in_place else output, restored)
            console.write_json(orjson.dumps({"files": [entry], "failed": 0}) + b"\n")
        elif not quiet:
            print_restored(reduced, restored, in_place)
