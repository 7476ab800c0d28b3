"""The ``ctx`` command: parse arguments, call the library, render, set the exit code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli import api, storage
from ctxcli._version import __version__
from ctxcli.cli import batch as cli_batch
from ctxcli.cli import console
from ctxcli.cli import dataset as cli_dataset
from ctxcli.cli import info as cli_info
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.config import config_app
from ctxcli.core.errors import CtxError, ExitCode
from ctxcli.pipeline.config import Config, load_config
from ctxcli.services.tokens import CountOptions

app = typer.Typer(
    name="ctx",
    help="Shrink LLM-agent transcripts losslessly: reduce, preview and restore.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

Input = Annotated[str, typer.Argument(help="Transcript file, or - for stdin.", show_default=False)]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="ctx.toml to use.", dir_okay=False)
]
TokenizerOpt = Annotated[
    str | None,
    typer.Option("--tokenizer", help="cl100k, o200k, approx or anthropic (overrides config)."),
]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="Transcript format (default: auto-detect).")
]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset", help="Run a named stage chain (see 'ctx presets') instead of the config's."
    ),
]
OnInvalidOpt = Annotated[
    str,
    typer.Option(
        "--on-invalid", help="error: stop at a line that is not JSON; keep: pass it through."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Inputs = Annotated[
    list[str] | None,
    typer.Argument(
        help="Transcript file, - for stdin, or several files or directories.", show_default=False
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        help="Processes: files at once for several inputs (default 1), "
        "else counting processes for one large file (default: every core).",
    ),
]
NoCacheOpt = Annotated[
    bool, typer.Option("--no-cache", help="Do not read or write the token-count cache.")
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine", help="local, or ray: INPUT is a JSONL/Parquet dataset reduced with Ray Data."
    ),
]
ColumnOpt = Annotated[
    str, typer.Option("--column", help="With --engine ray: the column holding trajectories.")
]


def _config(
    path: Path | None, tokenizer: str | None, fmt: str | None, preset: str | None = None
) -> Config:
    return load_config(path, preset=preset).with_overrides(tokenizer=tokenizer, format=fmt)


def _check_on_invalid(value: str) -> None:
    if value not in ("error", "keep"):
        raise CtxError(f"--on-invalid {value!r} is invalid: use 'error' or 'keep'.")


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
            "--output", "-o", help="Output file, or - for stdout; a directory for several inputs."
        ),
    ] = "-",
    offload_dir: Annotated[
        str | None, typer.Option("--offload-dir", help="Where removed text goes.")
    ] = None,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    tokenizer: TokenizerOpt = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = "error",
    force: Annotated[
        bool, typer.Option("--force", help="Replace an offload directory that holds other data.")
    ] = False,
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="Replace INPUT atomically; offload to INPUT.offload."),
    ] = False,
    json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
    jobs: JobsOpt = None,
    no_cache: NoCacheOpt = False,
    engine: EngineOpt = "local",
    column: ColumnOpt = "messages",
) -> None:
    """Reduce a transcript; write it and an offload directory holding what was removed.

    Several files or a directory go into the directory -o, each with its
    offload directory beside it; a file that fails does not stop the others.

    Example:

    \b
        ctx reduce session.jsonl -o reduced.jsonl
        ctx reduce sessions/ -o reduced/ --jobs 2
        ctx reduce s3://bucket/run.jsonl -o s3://bucket/out.jsonl
        ctx reduce --engine ray trajectories/ -o reduced/ --column messages
    """
    with _errors():
        _check_on_invalid(on_invalid)
        cli_dataset.check_engine(engine, in_place)
        cfg = _config(config, tokenizer, format, preset)
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
            )
            raise typer.Exit(code)
        source = _resolve_input(inputs[0] if inputs else None)
        if in_place:
            output = source
        if json and output == api.STDIO:
            raise CtxError("--json prints the report on stdout; pass -o FILE for the transcript.")
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
                )
        if not quiet:
            _warn_all(report.warnings)
        if output == api.STDIO:
            console.write_stdout(data)
        if json:
            console.write_report(orjson.dumps(report.to_dict()) + b"\n")
        elif not quiet:
            from ctxcli.cli.render import saved_pct

            sys.stderr.write(
                f"ctx: {report.input}: {report.tokens_before:,} → {report.tokens_after:,} tokens "
                f"({saved_pct(report.tokens_before, report.tokens_after)} saved); "
                f"offload in {report.offload_dir}\n"
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
    on_invalid: OnInvalidOpt = "error",
    json: JsonOpt = False,
    fail_over: Annotated[
        int | None,
        typer.Option("--fail-over", help="Exit 1 if the reduced transcript has more tokens."),
    ] = None,
    jobs: JobsOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Preview what reduce would save, without writing anything.

    Several files or a directory give one table row per file.

    Example:

    \b
        ctx stats session.jsonl --json --fail-over 100000
    """
    with _errors():
        _check_on_invalid(on_invalid)
        cfg = _config(config, tokenizer, format, preset)
        if cli_batch.is_batch(inputs):
            assert inputs is not None
            code = cli_batch.stats_batch(
                inputs,
                cfg,
                on_invalid=on_invalid,
                jobs=jobs or 1,
                cache=not no_cache,
                json=json,
                fail_over=fail_over,
            )
            raise typer.Exit(code)
        source = _resolve_input(inputs[0] if inputs else None)
        with console.progress("counting tokens", enabled=not json) as bar:
            counting = CountOptions(cache=not no_cache, workers=jobs, progress=bar)
            report = api.stats_file(source, config=cfg, on_invalid=on_invalid, counting=counting)
        _warn_all(report.warnings)
        if json:
            console.write_report(orjson.dumps(report.to_dict()) + b"\n")
        else:
            from ctxcli.cli.render import monitors_table, report_table

            console.err_console().print(report_table(report))
            console.err_console().print(monitors_table(report))
        if fail_over is not None and report.tokens_after > fail_over:
            console.error(
                f"{source}: {report.tokens_after:,} tokens after reduction exceed "
                f"--fail-over {fail_over:,}."
            )
            raise typer.Exit(int(ExitCode.CHECK_FAILED))


@app.command()
def restore(
    reduced: Input,
    output: Annotated[
        str, typer.Option("--output", "-o", help="Where to write the original, or - for stdout.")
    ] = "-",
    offload_dir: Annotated[
        str | None,
        typer.Option("--offload-dir", help="The offload directory (default: REDUCED.offload)."),
    ] = None,
    engine: EngineOpt = "local",
    column: ColumnOpt = "messages",
    jobs: JobsOpt = None,
) -> None:
    """Rebuild the original transcript byte-for-byte from a reduced one.

    Example:

    \b
        ctx restore reduced.jsonl -o original.jsonl --offload-dir reduced.jsonl.offload
        ctx restore --engine ray reduced/ -o original/ --offload-dir reduced.offload
    """
    with _errors():
        cli_dataset.check_engine(engine)
        if engine == "ray":
            cli_dataset.restore_ray(
                reduced, output, offload_dir=offload_dir, column=column, jobs=jobs
            )
            return
        if storage.is_url(reduced) or storage.is_url(output) or storage.is_url(offload_dir):
            data = storage.restore_url(reduced, output, offload_dir=offload_dir)
        else:
            data = api.restore_file(reduced, output, offload_dir=offload_dir)
        if output == api.STDIO:
            console.write_stdout(data)


@app.command()
def validate(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(help="Transcript files, or - for stdin.", show_default=False),
    ] = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = "error",
    json: JsonOpt = False,
) -> None:
    """Check that every tool call has its result and every result its call; exit 1 if not.

    Several files are checked one after another (as pre-commit passes them); a file
    that cannot be read is reported and the others are still checked. The exit code
    is the worst one: 2 for an unreadable file, else 1 for a pairing problem.

    Example:

    \b
        ctx validate reduced.jsonl
    """
    from ctxcli.formats.validate import validate_bytes

    with _errors():
        _check_on_invalid(on_invalid)
        paths = inputs or [_resolve_input(None)]
        payloads: list[dict[str, Any]] = []
        code = ExitCode.OK
        for path in paths:
            try:
                raw = api.read_input(path)
                problems = validate_bytes(raw, path, format=format or "auto", on_invalid=on_invalid)
            except CtxError as exc:
                if len(paths) == 1:
                    raise
                console.error(str(exc))
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
            payload = payloads[0] if len(paths) == 1 else {"files": payloads, "failed": failed}
            console.write_stdout(orjson.dumps(payload) + b"\n")
        if code:
            raise typer.Exit(int(code))


# Commands that describe ctx itself live in cli_info; registered here to keep the order.
app.command()(cli_info.stages)
app.command()(cli_info.presets)
app.command()(cli_info.init)


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


def main() -> None:
    """Console-script entry point."""
    app()
