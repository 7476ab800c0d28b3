"""``ctx hooks``: install ctx's Claude Code / Codex hooks, check them, and run them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.options import JsonOpt, ScopeGlobalOpt, ScopeLocalOpt, ScopeProjectOpt
from ctxcli.cli.proxy import note
from ctxcli.hooks import settings as hooks_settings
from ctxcli.hooks.settings import Scope

__all__ = ["hooks_app", "install", "run", "status", "uninstall"]

hooks_app = typer.Typer(
    name="hooks",
    help="Offload big tool outputs inside Claude Code without a proxy (PostToolUse, PreCompact).",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode=None,
)

CODEX_NOTE = (
    "Codex: only the PreCompact snapshot; Codex hooks cannot replace a tool's output yet, "
    "so use 'ctx wrap codex' to reduce what Codex sends."
)

ClientArg = Annotated[str, typer.Argument(help="claude or codex.", show_default=False)]
DirOpt = Annotated[
    Path, typer.Option("--dir", help="The project's root.", file_okay=False, show_default=".")
]


def _scope(project: bool, local: bool, glob: bool) -> Scope:
    if project + local + glob > 1:
        console.error("choose one of --project, --local and --global.")
        raise typer.Exit(2)
    return Scope.LOCAL if local else Scope.GLOBAL if glob else Scope.PROJECT


@hooks_app.command()
def install(
    client: ClientArg,
    project: ScopeProjectOpt = False,
    local: ScopeLocalOpt = False,
    glob: ScopeGlobalOpt = False,
    directory: DirOpt = Path("."),
) -> None:
    """Write ctx's hooks into the client's settings, keeping everything already there.

    Claude Code gets PostToolUse (long Bash, Read, Grep, Glob, WebFetch and MCP outputs
    offloaded, a preview and the path left in their place) and PreCompact (a snapshot of
    the session before it compacts); Codex gets PreCompact only. Running it twice changes
    nothing; 'ctx hooks uninstall' gives the file back.

    Example:

    \b
        ctx hooks install claude
        ctx hooks install claude --global
    """
    with _errors():
        done = hooks_settings.install(client, _scope(project, local, glob), directory.resolve())
    note("ctx hooks")(f"{done.action}: {', '.join(done.events)} in {console.shown_path(done.path)}")
    if client == "codex":
        note("ctx hooks")(CODEX_NOTE)


@hooks_app.command()
def uninstall(
    client: ClientArg,
    project: ScopeProjectOpt = False,
    local: ScopeLocalOpt = False,
    glob: ScopeGlobalOpt = False,
    directory: DirOpt = Path("."),
) -> None:
    """Take ctx's hooks out: the file's original bytes come back if it was not edited since.

    Example:

    \b
        ctx hooks uninstall claude
    """
    with _errors():
        done = hooks_settings.uninstall(client, _scope(project, local, glob), directory.resolve())
    path = console.shown_path(done.path)
    said = {
        "restored": f"restored {path} as it was before ctx hooks install",
        "removed": f"removed {path} (ctx hooks install had created it)",
        "cleaned": f"took {', '.join(done.events)} out of {path} "
        "(it was edited since ctx wrote it: the edits are kept)",
        "absent": f"no ctx hooks in {path}",
    }
    note("ctx hooks")(said.get(done.action, f"{done.action}: {path}"))


@hooks_app.command()
def status(
    directory: DirOpt = Path("."),
    json: JsonOpt = False,
) -> None:
    """Say which settings files hold ctx's hooks, and which Claude Code and Codex are on PATH.

    Example:

    \b
        ctx hooks status
    """
    with _errors():
        found = hooks_settings.status(directory.resolve())
    if json:
        payload = {
            "files": [
                {
                    "client": f.client,
                    "scope": str(f.scope),
                    "path": str(f.path),
                    "exists": f.exists,
                    "events": list(f.events),
                }
                for f in found.files
            ],
            "versions": found.versions,
        }
        console.write_stdout(orjson.dumps(payload) + b"\n")
        return
    lines = []
    for f in found.files:
        what = ", ".join(f.events) if f.events else ("no ctx hooks" if f.exists else "no file")
        lines.append(f"{f.client:<6} {f.scope!s:<7} {what:<24} {console.shown_path(f.path)}")
    for client, version in found.versions.items():
        lines.append(f"{client} on PATH: {version or 'not found'}")
    lines.append(CODEX_NOTE)
    console.write_stdout(("\n".join(lines) + "\n").encode())


@hooks_app.command()
def run(
    event: Annotated[str, typer.Argument(help="post-tool-use or pre-compact.", show_default=False)],
) -> None:
    """What the installed hooks call: read the client's payload on stdin, answer on stdout.

    Never fails a tool call or a compaction: on any error the output goes through as it
    was, the exit code is 0 and one line goes to stderr and to ctx's hooks log.

    Example:

    \b
        ctx hooks run post-tool-use < payload.json
    """
    from ctxcli.hooks.runner import EVENTS, main

    if event not in EVENTS:
        console.error(f"unknown hook event {event!r}; expected one of: {', '.join(EVENTS)}.")
        raise typer.Exit(2)
    raise typer.Exit(main(event, sys.stdin.buffer, sys.stdout.buffer, sys.stderr))
