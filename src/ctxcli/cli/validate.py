"""``ctx validate``: parse, one library call per file, render."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli import api
from ctxcli.api import STDIO
from ctxcli.cli import boundary, console
from ctxcli.cli.boundary import errors
from ctxcli.cli.options import (
    AllowEmptyOpt,
    FormatOpt,
    JsonOpt,
    OnInvalidOpt,
    on_invalid_of,
    one_input,
)
from ctxcli.cli.sessions import LastOpt, ProjectOpt, SessionOpt, printable, session_input
from ctxcli.core.errors import VALIDATE_ON_INVALID, CtxError, ExitCode
from ctxcli.formats.diagnose import TRANSCRIPT_RULES, Diagnosis, envelope

__all__ = ["validate"]


def validate(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Transcript files, or - for stdin.", show_default=False, metavar="FILE"
        ),
    ] = None,
    format: FormatOpt = None,
    on_invalid: OnInvalidOpt = VALIDATE_ON_INVALID.value,
    json: JsonOpt = False,
    allow_empty: AllowEmptyOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Check that every tool call has its result and every result its call; exit 1 if not.

    A line that is not JSON is an error here in every format (a checker reports it);
    pass --on-invalid keep (or auto) to check the rest, the line then being a problem.
    These are the rules every transcript is held to; 'ctx doctor' runs them too, and
    the rules of the client that wrote a session (what breaks resuming it).

    Several files are checked one after another (as pre-commit passes them); a file
    that cannot be read is reported and the others are still checked. The exit code
    is the worst one: 2 for an unreadable file, else 1 for a pairing problem.

    Example:

    \b
        ctx validate reduced.jsonl
    """
    with errors():
        mode = on_invalid_of(on_invalid)
        paths = _paths(session_input(inputs, session, last, project), allow_empty)
        results: list[tuple[str, Diagnosis | CtxError]] = []
        for path in paths:
            try:
                results.append((path, api.validate(path, format=format or "auto", on_invalid=mode)))
            except CtxError as exc:
                if len(paths) == 1:
                    raise
                results.append((path, exc))
        code = _show(results, json=json)
        if code:
            raise typer.Exit(code)


def _paths(inputs: list[str] | None, allow_empty: bool) -> list[str]:
    """Files to validate: a directory stands for its transcripts, as for reduce and stats."""
    from ctxcli.api import batch

    if not inputs:
        return [one_input(None)]
    paths: list[str] = []
    for item in inputs:
        if item != STDIO and Path(item).is_dir():
            paths += [f for f, _ in batch.expand_inputs([item], allow_empty=allow_empty)]
        else:
            paths.append(item)
    return paths


def _show(results: list[tuple[str, Diagnosis | CtxError]], *, json: bool) -> int:
    """Print what each file holds and return the exit code.

    The exit code: 2 for an unreadable file, else 1 for a problem.
    """
    entries: list[dict[str, Any]] = []
    code = ExitCode.OK
    for path, found in results:
        if isinstance(found, CtxError):
            console.error(boundary.message(found))
            code = max(code, found.exit_code)
            entries.append({"input": path, "valid": False, "error": boundary.message(found)})
            continue
        entries.append(found.to_dict())
        if not found.valid:
            code = max(code, ExitCode.CHECK_FAILED)
        if not json:
            for p in found.problems:
                sys.stderr.write(printable(p.render(console.shown_path(path))) + "\n")
            if found.valid:
                sys.stderr.write(f"ctx: {printable(console.shown_path(path))}: valid\n")
    if json:
        console.write_stdout(orjson.dumps(envelope(entries)) + b"\n")
    else:
        names = ", ".join(rule.name for rule in TRANSCRIPT_RULES)
        sys.stderr.write(f"ctx: rules: {names} (ctx doctor adds the rules of a session's client)\n")
    return int(code)
