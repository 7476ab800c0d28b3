"""``ctx doctor``: what breaks resuming a session, and ``--fix`` to repair it losslessly."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli import api
from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.sessions import (
    LastOpt,
    LiveSecondsOpt,
    ProjectOpt,
    SessionOpt,
    printable,
    session_input,
)
from ctxcli.core.errors import CtxError, ExitCode
from ctxcli.formats.diagnose import Problem, envelope

__all__ = ["doctor"]


def _targets(
    file: str | None, session: str | None, last: bool, project: str | None, every: bool
) -> list[str]:
    if every:
        if file or session or last:
            raise CtxError("--all checks every session; do not name a file or session too.")
        from ctxcli.sessions import find_sessions

        return [str(s.path) for s in find_sessions(archived=False)]
    picked = session_input([file] if file else None, session, last, project)
    if not picked:
        raise CtxError("nothing to check: pass a FILE, --session ID, --last or --all.")
    return picked


def doctor(
    file: Annotated[
        str | None,
        typer.Argument(help="A session file (or use --session/--last/--all).", metavar="FILE"),
    ] = None,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    every: Annotated[bool, typer.Option("--all", help="Check every session.")] = False,
    fix: Annotated[
        bool,
        typer.Option("--fix", help="Repair in place; 'ctx restore FILE' undoes the repair."),
    ] = False,
    max_line_bytes: Annotated[
        int,
        typer.Option(
            "--max-line-bytes",
            metavar="BYTES",
            min=1024,
            help="Lines longer than this stall a resume.",
        ),
    ] = 1_000_000,
    force: Annotated[
        bool, typer.Option("--force", help="Repair even if the session looks in use.")
    ] = False,
    live_seconds: LiveSecondsOpt = 60,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Find what breaks resuming a session or the API call it makes; --fix repairs it.

    Checks the rules 'ctx validate' runs (a torn last line, malformed lines the
    client skips, tool calls without results and the reverse), then those of the
    client: dangling parentUuid (the chain may then start at an assistant turn, which
    the API rejects), a second root, empty text blocks, thinking without a signature,
    duplicated toolUseResult payloads, base64 images or PDFs stored again, a
    toolUseResult cut so it no longer parses, oversized lines, Codex records over
    16 MiB and a Codex saved context size that would compact a history that fits on
    resume ('--json' names, per problem, the client behaviour it guards). --fix edits
    the file in place and records every change, so 'ctx restore FILE --in-place'
    gives the original back. Exit 0: healthy (or all fixed; a duplicated payload is
    a warning); 1: problems that break a resume remain; 2: usage, or a session in
    use was skipped by --all --fix.

    Example:

    \b
        ctx doctor --last
        ctx doctor --session 4d5611e5 --fix
    """
    from ctxcli.sessions import diagnose, fix_in_place
    from ctxcli.store.inplace import LiveSessionError

    with _errors():
        paths = _targets(file, session, last, project, every)
        results: list[dict[str, Any]] = []
        code = ExitCode.OK
        for path in paths:
            fixed: list[Problem] = []
            if fix:
                try:
                    repair, change = fix_in_place(
                        Path(path),
                        force=force,
                        live_seconds=live_seconds,
                        max_line_bytes=max_line_bytes,
                    )
                except LiveSessionError as exc:
                    if not every:
                        raise
                    # One session in use does not stop the repair of the others.
                    console.error(str(exc))
                    results.append({"input": path, "valid": False, "skipped": str(exc)})
                    code = max(code, ExitCode.USAGE_ERROR)
                    continue
                assert repair.checked is not None
                fixed, problems = repair.fixed, repair.remaining
                entry = repair.checked.to_dict()
                entry["input"] = path
                entry["fixed"] = [p.to_dict() for p in fixed]
                entry["offload_dir"] = str(change.record) if change.record else None
                entry["notes"] = repair.notes
            else:
                found = diagnose(api.read_input(path), path, max_line_bytes=max_line_bytes)
                entry, problems = found.to_dict(), found.problems
            results.append(entry)
            if not entry["valid"]:
                code = max(code, ExitCode.CHECK_FAILED)
            if not json:
                _render(path, fixed, problems, entry)
        if json:
            console.write_stdout(orjson.dumps(envelope(results)) + b"\n")
        else:
            _render_rules(results)
        if code:
            raise typer.Exit(int(code))


def _render(
    path: str, fixed: list[Problem], problems: list[Problem], entry: dict[str, Any]
) -> None:
    path = console.shown_path(path)
    lines = [f"ctx: fixed: {p.render(path)}" for p in fixed]
    lines += [f"ctx: {path}: {note}" for note in entry.get("notes", [])]
    lines += [p.render(path) + _warning(p) for p in problems]
    if entry.get("offload_dir"):
        lines.append(
            f"ctx: {path}: repaired; the originals are in {console.shown_path(entry['offload_dir'])}; "
            f"undo with: ctx restore {path} --in-place"
        )
    elif entry["valid"]:
        lines.append(f"ctx: {path}: healthy")
    for line in lines:
        sys.stderr.write(printable(line) + "\n")


def _render_rules(results: list[dict[str, Any]]) -> None:
    """Which rules ran: one line per kind of file (a client's sessions get its own rules)."""
    seen: dict[tuple[str, ...], list[str]] = {}
    for entry in results:
        if "rules" not in entry:
            continue  # skipped: in use
        formats = seen.setdefault(tuple(entry["rules"]), [])
        if entry["format"] not in formats:
            formats.append(entry["format"] or "unknown format")
    for rules, formats in seen.items():
        sys.stderr.write(f"ctx: rules ({', '.join(formats)}): {', '.join(rules)}\n")


def _warning(problem: Problem) -> str:
    """For a problem that does not break a resume: says so, and whether --fix removes it."""
    if not problem.warning:
        return ""
    fix = "--fix removes it" if problem.fixable else "--fix cannot remove it"
    return f" (a warning: a resume works with it; {fix})"
