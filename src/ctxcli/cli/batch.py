"""``ctx reduce``/``ctx stats`` over several files or a directory: render and exit code.

The work is :func:`ctxcli.api.batch.reduce_many` / :func:`ctxcli.api.batch.stats_many`; this
module only prints what they return. stdout carries one JSON object with ``--json``
(``{"files": [...], "failed": N}``), nothing otherwise; everything else goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeGuard

import orjson

from ctxcli import api
from ctxcli.api import RunOptions, batch
from ctxcli.cli import console
from ctxcli.cli.payload import json_payload, saved_pct
from ctxcli.core.errors import CtxError, ExitCode
from ctxcli.pipeline.config import Config

__all__ = [
    "View",
    "is_batch",
    "reduce_batch",
    "restore_batch",
    "stats_batch",
]


def is_batch(inputs: Sequence[str] | None) -> TypeGuard[Sequence[str]]:
    """True if the arguments name more than one file or a directory."""
    if not inputs:
        return False
    return len(inputs) > 1 or (inputs[0] != api.STDIO and Path(inputs[0]).is_dir())


def _check_inputs(inputs: Sequence[str]) -> None:
    if api.STDIO in inputs:
        raise CtxError("- (stdin) cannot be combined with other inputs; pass files only.")


def _json(results: Sequence[batch.FileResult]) -> None:
    console.write_json(orjson.dumps(json_payload(results)) + b"\n")


@dataclass(frozen=True)
class View:
    """How a command over several files shows its results (and how many run at once).

    Attributes:
        json: one JSON object on stdout instead of lines and tables on stderr.
        quiet: print only errors.
        allow_empty: a directory holding no transcript is not an error.
        jobs: files handled at once.
        fail_over: stats exits 1 when a file has more tokens than this after reduction.
    """

    json: bool = False
    quiet: bool = False
    allow_empty: bool = False
    jobs: int | None = None
    fail_over: int | None = None


def _options(run: RunOptions, view: View, bar: Callable[[int, int], None]) -> batch.BatchOptions:
    return batch.BatchOptions(
        jobs=view.jobs or 1,
        on_invalid=run.on_invalid,
        force=run.force,
        cache=run.counting is None or run.counting.cache,
        allow_empty=view.allow_empty,
        progress=lambda _r, done, total: bar(done, total),
    )


def reduce_batch(
    inputs: Sequence[str],
    output: str,
    offload_dir: str | None,
    config: Config,
    run: RunOptions,
    view: View,
) -> int:
    """Reduce every input into the directory ``output``; return the exit code."""
    _check_inputs(inputs)
    if output == api.STDIO:
        raise CtxError("with several inputs, -o must name a directory; stdout holds only one file.")
    json, quiet = view.json, view.quiet
    with console.progress("files", enabled=not (quiet or json)) as bar:
        options = _options(run, view, bar)
        results = batch.reduce_many(
            inputs, output, config, offload_dir=offload_dir, options=options
        )
    failed = 0
    for r in results:
        if r.report is None:
            failed += 1
            console.error(r.error or f"{r.input}: failed")
        elif not (quiet or json):
            for w in r.report.warnings:
                console.warn(w)
            rep = r.report
            sys.stderr.write(
                f"ctx: {rep.input} → {r.output}: {rep.tokens_before:,} → {rep.tokens_after:,} "
                f"tokens ({saved_pct(rep.tokens_before, rep.tokens_after)} saved)\n"
            )
    if json:
        _json(results)
    elif not quiet:
        sys.stderr.write(f"ctx: {len(results) - failed} reduced, {failed} failed\n")
    return batch.exit_code(results)


def stats_batch(inputs: Sequence[str], config: Config, run: RunOptions, view: View) -> int:
    """Preview every input: one table row per file; return the exit code."""
    _check_inputs(inputs)
    json, fail_over = view.json, view.fail_over
    with console.progress("files", enabled=not json) as bar:
        options = _options(replace(run, force=False), view, bar)
        results = batch.stats_many(inputs, config, options=options)
    for r in results:
        if r.report is None:
            console.error(r.error or f"{r.input}: failed")
        else:
            for w in r.report.warnings:
                console.warn(w)
    if json:
        _json(results)
    else:
        # Here, not at the top: `ctx stats --json` prints no table and loads no Rich.
        from ctxcli.cli.render import batch_table

        console.err_console().print(batch_table(results))
    over = [
        r
        for r in results
        if r.report and fail_over is not None and r.report.tokens_after > fail_over
    ]
    for r in over:
        assert r.report is not None
        console.error(
            f"{r.input}: {r.report.tokens_after:,} tokens after reduction exceed "
            f"--fail-over {fail_over:,}."
        )
    code = batch.exit_code(results)
    if code == int(ExitCode.OK) and over:
        return int(ExitCode.CHECK_FAILED)
    return code


def restore_batch(inputs: Sequence[str], output: str, in_place: bool, view: View) -> int:
    """Restore every input into the directory ``output`` (or in place); return the exit code."""
    _check_inputs(inputs)
    if not in_place and output == api.STDIO:
        raise CtxError("with several inputs, -o must name a directory (or restore in place).")
    quiet = view.quiet
    results = batch.restore_many(
        inputs, None if in_place else output, in_place=in_place, allow_empty=view.allow_empty
    )
    for r in results:
        if r.restored is None:
            console.error(r.error or f"{r.input}: failed")
        elif not quiet:
            steps = len(r.restored.steps)
            sys.stderr.write(
                f"ctx: {r.input} → {r.output}: restored {len(r.restored.data):,} bytes "
                f"({steps} reduction{'s' if steps != 1 else ''} undone)\n"
            )
    failed = sum(1 for r in results if not r.ok)
    if not quiet:
        sys.stderr.write(f"ctx: {len(results) - failed} restored, {failed} failed\n")
    return max((r.exit_code for r in results), default=int(ExitCode.OK))
