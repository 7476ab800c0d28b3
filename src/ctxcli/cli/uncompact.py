"""``ctx uncompact``: a session with the conversation from before its compaction back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.options import JsonOpt
from ctxcli.cli.sessions import LastOpt, LiveSecondsOpt, ProjectOpt, SessionOpt, session_input
from ctxcli.core.errors import CtxError

__all__ = ["uncompact"]


def uncompact(
    file: Annotated[
        str | None,
        typer.Argument(help="A session file (or use --session/--last).", metavar="FILE"),
    ] = None,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", metavar="OUT", help="Write the result to OUT."),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="Replace the session itself ('ctx restore' undoes it)."),
    ] = False,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            metavar="TOKENS",
            min=1000,
            help="Tokens a resume may send (default: the client's window minus a work "
            "reserve: 120,000 for Claude Code, 160,000 for Codex).",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Change the session even if it looks in use.")
    ] = False,
    live_seconds: LiveSecondsOpt = 60,
    json: JsonOpt = False,
) -> None:
    """Undo a compaction: every prompt and answer from before it, instead of its summary.

    Claude Code (2.x compact_boundary, 1.0.x isCompactSummary restarts) and Codex
    (compacted records; a rollout Codex rewrote is rebuilt from its PreCompact
    snapshot). The result is reduced losslessly to fit --budget; if even that does
    not fit, the newest part is kept whole and the rest is named. 'ctx restore'
    gives the compacted file back byte for byte.

    Example:

    \b
        ctx uncompact --last --in-place
        ctx uncompact session.jsonl -o uncompacted.jsonl --budget 100000
    """
    from ctxcli.sessions.uncompact import uncompact as run

    with _errors():
        if (output is None) == (not in_place):
            raise CtxError("say where the result goes: -o OUT or --in-place (one of them).")
        picked = session_input([file] if file else None, session, last, project)
        if not picked:
            raise CtxError("nothing to uncompact: pass a FILE, --session ID or --last.")
        path = Path(picked[0])
        with console.progress("uncompacting", enabled=not json) as bar:
            result = run(
                path,
                output=None if in_place else Path(str(output)),
                budget_tokens=budget,
                force=force,
                live_seconds=live_seconds,
                log=None if json else console.error,
                progress=bar,
            )
        entry = _entry(path, result)
        if json:
            console.write_stdout(orjson.dumps(entry) + b"\n")
        else:
            _render(entry)


def _entry(path: Path, result: Any) -> dict[str, Any]:
    plan = result.plan
    return {
        "input": str(path),
        "output": str(result.path),
        "agent": plan.agent,
        "compactions": plan.compactions,
        "dropped_lines": plan.dropped,
        "relinked": plan.relinked,
        "snapshot": str(plan.snapshot) if plan.snapshot else None,
        "chain_messages": plan.chain_messages,
        "budget_tokens": result.budget_tokens,
        "resume_tokens": result.resume_tokens,
        "record": str(result.record) if result.record else None,
        "left_out": result.left_out,
        "partial": plan.partial,
    }


def _render(entry: dict[str, Any]) -> None:
    out, name = console.shown_path(entry["output"]), console.shown_path(entry["input"])
    for line in entry["partial"]:
        sys.stderr.write(
            f"ctx: {name}:{line}: a partial compaction (it preserves earlier "
            "messages) is left as it is\n"
        )
    if not entry["compactions"]:
        sys.stderr.write(f"ctx: {name}: no compaction found; nothing written\n")
        return
    lines = ", ".join(str(n) for n in entry["compactions"])
    sys.stderr.write(
        f"ctx: {out}: undid {len(entry['compactions'])} compaction(s) (line {lines}); "
        f"a resume sends {entry['resume_tokens']:,} tokens (budget {entry['budget_tokens']:,})\n"
    )
    if entry["snapshot"]:
        sys.stderr.write(
            f"ctx: rebuilt from the snapshot {console.shown_path(entry['snapshot'])}\n"
        )
    for note in entry["left_out"]:
        sys.stderr.write(f"ctx: left out to fit the budget: {note}\n")
    if entry["resume_tokens"] > entry["budget_tokens"]:
        sys.stderr.write(
            f"ctx: warning: a resume still sends {entry['resume_tokens']:,} tokens, over the "
            f"budget; the client may compact again\n"
        )
    sys.stderr.write(f"ctx: undo with: ctx restore {out} --in-place\n")
