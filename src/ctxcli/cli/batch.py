"""``ctx reduce``/``ctx stats`` over several files or a directory: render and exit code.

The work is :func:`ctxcli.api.batch.reduce_many` / :func:`ctxcli.api.batch.stats_many`; this
module only prints what they return. stdout carries one JSON object with ``--json``
(``{"files": [...], "failed": N}``), nothing otherwise; everything else goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

import orjson

from ctxcli import api
from ctxcli.api import RunOptions, batch
from ctxcli.cli import console
from ctxcli.cli.payload import json_payload, restored_entry, saved
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


def _json(results: Sequence[batch.FileResult], config: Config) -> None:
    console.write_json(orjson.dumps(json_payload(results, config)) + b"\n")


def strict_code(reports: Sequence[api.Report | None], strict: bool) -> int:
    """``--strict``: 3 (API_ERROR) if a stage of any run fell back, each said on stderr.

    A stage that cannot run as configured (a summarizer or classifier without a key, or
    past its retries) falls back and the run goes on, fail-safe; a strict run still
    writes its output, then exits 3 so CI notices. 0 otherwise.
    """
    fell = [(rep.input, stage, why) for rep in reports if rep for stage, why in rep.fallbacks]
    if not strict or not fell:
        return int(ExitCode.OK)
    for name, stage, why in fell:
        console.error(f"{name}: {stage} fell back ({why}); --strict fails the run")
    return int(ExitCode.API_ERROR)


@dataclass(frozen=True)
class View:
    """How a command over several files shows its results.

    Attributes:
        json: one JSON object on stdout instead of lines and tables on stderr.
        quiet: print only errors.
        fail_over: stats exits 1 when a file has more tokens than this after reduction.
        strict: exit 3 when a stage of any file fell back (see :func:`strict_code`).
    """

    json: bool = False
    quiet: bool = False
    fail_over: int | None = None
    strict: bool = False


def _progress(bar: Callable[[int, int], None]) -> batch.FileProgress:
    return lambda _r, done, total: bar(done, total)


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
        results = batch.reduce_many(
            inputs,
            output,
            config,
            offload_dir=offload_dir,
            options=run,
            progress=_progress(bar),
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
                f"tokens ({saved(rep.tokens_before, rep.tokens_after)})\n"
            )
    if json:
        _json(results, config)
    elif not quiet:
        sys.stderr.write(f"ctx: {len(results) - failed} reduced, {failed} failed\n")
    strict = strict_code([r.report for r in results], view.strict)
    return batch.exit_code(results) or strict


def stats_batch(inputs: Sequence[str], config: Config, run: RunOptions, view: View) -> int:
    """Preview every input: one table row per file; return the exit code."""
    _check_inputs(inputs)
    json, fail_over = view.json, view.fail_over
    with console.progress("files", enabled=not json) as bar:
        results = batch.stats_many(inputs, config, options=run, progress=_progress(bar))
    for r in results:
        if r.report is None:
            console.error(r.error or f"{r.input}: failed")
        else:
            for w in r.report.warnings:
                console.warn(w)
    if json:
        _json(results, config)
    else:
        # Here, not at the top: `ctx stats --json` prints no table and loads no Rich.
        from ctxcli.cli.render import batch_table, print_table

        print_table(batch_table(results, console.width()))
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
    code = batch.exit_code(results) or strict_code([r.report for r in results], view.strict)
    if code == int(ExitCode.OK) and over:
        return int(ExitCode.CHECK_FAILED)
    return code


def restore_batch(
    inputs: Sequence[str], output: str, in_place: bool, run: RunOptions, view: View
) -> int:
    """Restore every input into the directory ``output`` (or in place); return the exit code."""
    _check_inputs(inputs)
    if not in_place and output == api.STDIO:
        raise CtxError("with several inputs, -o must name a directory (or restore in place).")
    quiet = view.quiet or view.json
    results = batch.restore_many(
        inputs, None if in_place else output, in_place=in_place, options=run
    )
    if view.json:
        entries = [
            restored_entry(r.input, str(r.output), r.restored)
            if r.restored is not None
            else {"input": r.input, "error": r.error}
            for r in results
        ]
        failed = sum(1 for r in results if not r.ok)
        console.write_json(orjson.dumps({"files": entries, "failed": failed}) + b"\n")
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
