"""The ``ctx`` command: parse arguments, call the library, render, set the exit code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
import typer.core

from ctxcli import api
from ctxcli._version import __version__
from ctxcli.cli import batch as cli_batch
from ctxcli.cli import boundary, console
from ctxcli.cli import cost as cli_cost
from ctxcli.cli import dataset as cli_dataset
from ctxcli.cli import info as cli_info
from ctxcli.cli import mcp as cli_mcp
from ctxcli.cli import proxy as cli_proxy
from ctxcli.cli import report as cli_report
from ctxcli.cli import wrap as cli_wrap
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.config import config_app
from ctxcli.cli.doctor import doctor
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
    TokenizerOpt,
    check_on_invalid,
)
from ctxcli.cli.sessions import (
    LastOpt,
    LiveSecondsOpt,
    ProjectOpt,
    SessionOpt,
    is_session_file,
    reduce_session_in_place,
    restore_session_file,
    session_input,
    sessions,
)
from ctxcli.core.errors import CtxError, ExitCode
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.results import Report
from ctxcli.services.tokens import CountOptions

if TYPE_CHECKING:
    from ctxcli.report import ReportData

# Start-up: what only some commands need (remote storage, the report package,
# validation, batches of files) is imported in those commands, so `ctx stats --json`
# of one file loads none of it (tests/test_layering.py keeps it so).

app = typer.Typer(
    name="ctx",
    help="Shrink LLM-agent transcripts losslessly: reduce, preview and restore.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="local|ray",
        help="local, or ray: INPUT is a JSONL/Parquet dataset reduced with Ray Data.",
    ),
]
ColumnOpt = Annotated[
    str,
    typer.Option(
        "--column", metavar="NAME", help="With --engine ray: the column holding trajectories."
    ),
]


def _config(
    path: Path | None, tokenizer: str | None, fmt: str | None, preset: str | None = None
) -> Config:
    return load_config(path, preset=preset).with_overrides(tokenizer=tokenizer, format=fmt)


def _resolve_input(path: str | None) -> str:
    if path is not None:
        return path
    if sys.stdin.isatty():
        raise CtxError("no INPUT given and stdin is a terminal; pass a file or pipe one with -.")
    return api.STDIO


def _warn_all(warnings: list[str]) -> None:
    for w in warnings:
        console.warn(w)


@app.command()
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
    offload_dir: Annotated[
        str | None, typer.Option("--offload-dir", metavar="DIR", help="Where removed text goes.")
    ] = None,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    tokenizer: TokenizerOpt = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = "auto",
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace the offload directory of another transcript (never other data); "
            "change a session even if it looks in use.",
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
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
    with _errors():
        check_on_invalid(on_invalid)
        cli_dataset.check_engine(engine, in_place)
        cfg = _config(config, tokenizer, format, preset)
        if no_incremental:
            cfg = cfg.with_overrides(incremental=False)
        if engine == "ray":
            cli_dataset.reduce_ray(
                inputs,
                output,
                cfg,
                offload_dir=offload_dir,
                column=column,
                jobs=jobs,
                json=json,
                quiet=quiet,
            )
            return
        inputs = session_input(inputs, session, last, project)
        if cli_batch.is_batch(inputs):
            if in_place:
                raise CtxError("--in-place takes one file; pass -o DIR for several inputs.")
            assert inputs is not None
            code = cli_batch.reduce_batch(
                inputs,
                output,
                cfg,
                offload_dir=offload_dir,
                force=force,
                on_invalid=on_invalid,
                jobs=jobs or 1,
                cache=not no_cache,
                json=json,
                quiet=quiet,
                allow_empty=allow_empty,
            )
            raise typer.Exit(code)
        source = _resolve_input(inputs[0] if inputs else None)
        if in_place and offload_dir is None and (session or last or is_session_file(source)):
            reduce_session_in_place(
                source,
                cfg,
                force=force,
                live_seconds=live_seconds,
                on_invalid=on_invalid,
                json=json,
                quiet=quiet,
                counting=CountOptions(cache=not no_cache, workers=jobs),
            )
            return
        if in_place:
            output = source
        if json and output == api.STDIO:
            raise CtxError("--json prints the report on stdout; pass -o FILE for the transcript.")
        from ctxcli.api import remote as storage

        remote = storage.is_url(source) or storage.is_url(output) or storage.is_url(offload_dir)
        if remote and in_place:
            raise CtxError("--in-place takes a local file; pass -o for a URL.")
        with console.progress("counting tokens", enabled=not (quiet or json)) as bar:
            counting = CountOptions(cache=not no_cache, workers=jobs, progress=bar)
            if remote:
                report, data = storage.reduce_url(
                    source,
                    output,
                    config=cfg,
                    offload_dir=offload_dir,
                    force=force,
                    on_invalid=on_invalid,
                    counting=counting,
                )
                if output == api.STDIO:
                    console.write_stdout(data)
            else:
                report, data = api.reduce_file(
                    source,
                    output,
                    config=cfg,
                    offload_dir=offload_dir,
                    force=force,
                    on_invalid=on_invalid,
                    in_place=in_place,
                    counting=counting,
                    # Written before the offload is committed: a reader that fails leaves none.
                    write=console.write_stdout if output == api.STDIO else None,
                    # A file output is written as it is made, never held whole.
                    return_output=False,
                )
        _print_reduced(report, json=json, quiet=quiet)


def _print_reduced(report: Report, *, json: bool, quiet: bool) -> None:
    """What ``ctx reduce`` of one file says: warnings, then the report or a summary line."""
    if not quiet:
        _warn_all(report.warnings)
    if json:
        console.write_report(orjson.dumps(cli_batch.single_payload(report)) + b"\n")
    elif not quiet:
        from ctxcli.cli.render import saved_pct

        sys.stderr.write(
            f"ctx: {report.input}: {report.tokens_before:,} → {report.tokens_after:,} tokens "
            f"({saved_pct(report.tokens_before, report.tokens_after)} saved); "
            f"offload in {report.offload_dir}\n"
        )
        if report.kept_lines:
            sys.stderr.write(
                f"ctx: {report.input}: the first {report.kept_lines:,} lines kept from the "
                "previous run (the file grew); the rest reduced\n"
            )
        before, after = report.resume_tokens_before, report.resume_tokens_after
        if before is not None and after is not None:
            sys.stderr.write(
                f"ctx: {report.input}: a resume sends {before:,} → {after:,} tokens "
                f"({saved_pct(before, after)} saved); file {report.bytes_before:,} → "
                f"{report.bytes_after:,} bytes\n"
            )


@app.command()
def stats(
    inputs: Inputs = None,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    tokenizer: TokenizerOpt = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = "auto",
    json: JsonOpt = False,
    fail_over: Annotated[
        int | None,
        typer.Option(
            "--fail-over",
            metavar="TOKENS",
            help="Exit 1 if the reduced transcript has more tokens.",
        ),
    ] = None,
    jobs: JobsOpt = None,
    no_cache: NoCacheOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    allow_empty: AllowEmptyOpt = False,
    monitors: Annotated[
        bool,
        typer.Option(
            "--monitors", help="Always show the stuck-agent monitors (default: when one fires)."
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
    with _errors():
        check_on_invalid(on_invalid)
        cfg = _config(config, tokenizer, format, preset)
        inputs = session_input(inputs, session, last, project)
        if cli_batch.is_batch(inputs):
            if by_tool or top:
                raise CtxError("--by-tool and --top take one file; run them file by file.")
            assert inputs is not None
            code = cli_batch.stats_batch(
                inputs,
                cfg,
                on_invalid=on_invalid,
                jobs=jobs or 1,
                cache=not no_cache,
                json=json,
                fail_over=fail_over,
                allow_empty=allow_empty,
            )
            raise typer.Exit(code)
        source = _resolve_input(inputs[0] if inputs else None)
        data: ReportData | None = None
        with console.progress("counting tokens", enabled=not json) as bar:
            counting = CountOptions(cache=not no_cache, workers=jobs, progress=bar)
            if by_tool or top:
                # The breakdown `ctx report` shows: the same run, kept in detail.
                # Imported here: the report package is start-up time for every command.
                from ctxcli.report import analyze_file

                data = analyze_file(
                    source, config=cfg, on_invalid=on_invalid, counting=counting, top=top or 0
                )
                report = data.report
            else:
                report = api.stats_file(
                    source,
                    config=cfg,
                    on_invalid=on_invalid,
                    counting=counting,
                    output=output,
                    offload_dir=offload_dir,
                    in_place=in_place,
                )
        _print_stats(report, data, json=json, by_tool=by_tool, top=bool(top), monitors=monitors)
        if fail_over is not None and report.tokens_after > fail_over:
            console.error(
                f"{source}: {report.tokens_after:,} tokens after reduction exceed "
                f"--fail-over {fail_over:,}."
            )
            raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _print_stats(
    report: Report, data: ReportData | None, *, json: bool, by_tool: bool, top: bool, monitors: bool
) -> None:
    """What ``ctx stats`` of one file shows: warnings, then the JSON report or the tables."""
    _warn_all(report.warnings)
    if json:
        payload = cli_batch.single_payload(report)
        if by_tool and data is not None:
            payload["by_tool"] = [r.to_dict() for r in data.by_tool]
        if top and data is not None:
            payload["top"] = [it.to_dict() for it in data.top]
        console.write_report(orjson.dumps(payload) + b"\n")
        return
    from ctxcli.cli.render import (
        monitors_fired,
        monitors_table,
        report_table,
        tools_table,
        top_table,
    )

    console.err_console().print(report_table(report))
    if monitors or monitors_fired(report):
        console.err_console().print(monitors_table(report))
    if by_tool and data is not None:
        console.err_console().print(tools_table(data.by_tool))
    if top and data is not None:
        console.err_console().print(top_table(data.top))


@app.command()
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
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
        ctx restore --engine ray reduced/ -o original/ --offload-dir reduced.offload
    """
    with _errors():
        cli_dataset.check_engine(engine)
        picked = session_input(inputs, session, last, project)
        if engine == "ray":
            cli_dataset.restore_ray(
                _resolve_input(picked[0] if picked else None),
                output,
                offload_dir=offload_dir,
                column=column,
                jobs=jobs,
            )
            return
        if cli_batch.is_batch(picked):
            assert picked is not None
            raise typer.Exit(
                cli_batch.restore_batch(
                    picked, output, in_place=in_place, quiet=quiet, allow_empty=allow_empty
                )
            )
        reduced = _resolve_input(picked[0] if picked else None)
        from ctxcli.api import remote as storage

        if storage.is_url(reduced) or storage.is_url(output) or storage.is_url(offload_dir):
            data = storage.restore_url(reduced, output, offload_dir=offload_dir)
            if output == api.STDIO:
                console.write_stdout(data)
            return
        if offload_dir is None and reduced != api.STDIO:
            if restore_session_file(reduced, output, in_place, force, live_seconds):
                return
        restored = api.restore_transcript(
            reduced, None if in_place else output, offload_dir=offload_dir, in_place=in_place
        )
        if output == api.STDIO and not in_place:
            console.write_stdout(restored.data)
        if not quiet:
            for step in restored.steps:
                carried = (
                    f", {step.appended_bytes:,} appended bytes kept" if step.appended_bytes else ""
                )
                sys.stderr.write(
                    f"ctx: {reduced}: restored {step.restored_bytes:,} bytes "
                    f"(sha256 {step.restored_sha256[:12]}) from {step.offload_dir}{carried}\n"
                )


@app.command()
def validate(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Transcript files, or - for stdin.", show_default=False, metavar="FILE..."
        ),
    ] = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = "error",
    json: JsonOpt = False,
    allow_empty: AllowEmptyOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Check that every tool call has its result and every result its call; exit 1 if not.

    A line that is not JSON is an error here in every format (a checker reports it);
    pass --on-invalid keep (or auto) to check the rest.

    Several files are checked one after another (as pre-commit passes them); a file
    that cannot be read is reported and the others are still checked. The exit code
    is the worst one: 2 for an unreadable file, else 1 for a pairing problem.

    Example:

    \b
        ctx validate reduced.jsonl
    """

    from ctxcli.formats.validate import validate_bytes

    with _errors():
        check_on_invalid(on_invalid)
        paths = _validate_paths(session_input(inputs, session, last, project), allow_empty)
        payloads: list[dict[str, Any]] = []
        code = ExitCode.OK
        for path in paths:
            try:
                raw = api.read_input(path)
                problems = validate_bytes(raw, path, format=format or "auto", on_invalid=on_invalid)
            except CtxError as exc:
                if len(paths) == 1:
                    raise
                console.error(boundary.message(exc))
                code = max(code, exc.exit_code)
                continue
            payloads.append(
                {
                    "input": path,
                    "valid": not problems,
                    "problems": [
                        {"line": p.line, "kind": p.kind, "call_id": p.call_id, "message": p.message}
                        for p in problems
                    ],
                }
            )
            if problems:
                code = max(code, ExitCode.CHECK_FAILED)
            if not json:
                for p in problems:
                    sys.stderr.write(p.render(path) + "\n")
                if not problems:
                    sys.stderr.write(f"ctx: {path}: valid\n")
        if json:
            failed = len(paths) - sum(1 for p in payloads if p["valid"])
            # One shape for one file or many (as for stats and reduce): files + failed,
            # and a single file's own entry at the top level too.
            single = payloads[0] if len(paths) == 1 and payloads else {}
            payload = {**single, "files": payloads, "failed": failed}
            console.write_stdout(orjson.dumps(payload) + b"\n")
        if code:
            raise typer.Exit(int(code))


def _validate_paths(inputs: list[str] | None, allow_empty: bool) -> list[str]:
    """Files to validate: a directory stands for its transcripts, as for reduce and stats."""
    from ctxcli.api import batch

    if not inputs:
        return [_resolve_input(None)]
    paths: list[str] = []
    for item in inputs:
        if item != api.STDIO and Path(item).is_dir():
            paths += [f for f, _ in batch.expand_inputs([item], allow_empty=allow_empty)]
        else:
            paths.append(item)
    return paths


# Commands that describe ctx itself live in cli_info; registered here to keep the order.
app.command()(cli_info.stages)
app.command()(cli_info.presets)
app.command()(cli_info.init)
app.command()(sessions)
app.command()(doctor)
app.command()(cli_report.report)
app.command()(cli_cost.cost)


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


app.add_typer(config_app)
app.command()(cli_proxy.proxy)
app.command()(cli_wrap.wrap)
app.command()(cli_mcp.mcp)


def main() -> None:
    """Console-script entry point."""
    app()
