"""``ctx reduce``/``ctx stats`` over several files or a directory: render and exit code.

The work is :func:`ctxcli.batch.reduce_many` / :func:`ctxcli.batch.stats_many`; this
module only prints what they return. stdout carries one JSON object with ``--json``
(``{"files": [...], "failed": N}``), nothing otherwise; everything else goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from ctxcli import api, batch
from ctxcli.cli import console
from ctxcli.core.errors import CtxError, ExitCode
from ctxcli.pipeline.config import Config


def is_batch(inputs: Sequence[str] | None) -> bool:
    """True if the arguments name more than one file or a directory."""
    if not inputs:
        return False
    return len(inputs) > 1 or (inputs[0] != api.STDIO and Path(inputs[0]).is_dir())


def _check_inputs(inputs: Sequence[str]) -> None:
    if api.STDIO in inputs:
        raise CtxError("- (stdin) cannot be combined with other inputs; pass files only.")


def _json(results: Sequence[batch.FileResult]) -> None:
    payload = {
        "files": [r.to_dict() for r in results],
        "failed": sum(1 for r in results if not r.ok),
    }
    console.write_report(orjson.dumps(payload) + b"\n")


def reduce_batch(
    inputs: Sequence[str],
    output: str,
    config: Config,
    *,
    offload_dir: str | None,
    force: bool,
    on_invalid: str,
    jobs: int,
    cache: bool,
    json: bool,
    quiet: bool,
) -> int:
    """Reduce every input into the directory ``output``; return the exit code."""
    from ctxcli.cli.render import saved_pct

    _check_inputs(inputs)
    if output == api.STDIO:
        raise CtxError("with several inputs, -o must name a directory; stdout holds only one file.")
    with console.progress("files", enabled=not (quiet or json)) as bar:
        results = batch.reduce_many(
            inputs,
            output,
            config,
            jobs=jobs,
            offload_dir=offload_dir,
            force=force,
            on_invalid=on_invalid,
            cache=cache,
            progress=lambda _r, done, total: bar(done, total),
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


def stats_batch(
    inputs: Sequence[str],
    config: Config,
    *,
    on_invalid: str,
    jobs: int,
    cache: bool,
    json: bool,
    fail_over: int | None,
) -> int:
    """Preview every input: one table row per file; return the exit code."""
    _check_inputs(inputs)
    with console.progress("files", enabled=not json) as bar:
        results = batch.stats_many(
            inputs,
            config,
            jobs=jobs,
            on_invalid=on_invalid,
            cache=cache,
            progress=lambda _r, done, total: bar(done, total),
        )
    for r in results:
        if r.report is None:
            console.error(r.error or f"{r.input}: failed")
        else:
            for w in r.report.warnings:
                console.warn(w)
    if json:
        _json(results)
    else:
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
