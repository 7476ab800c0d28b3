"""``ctx sessions`` and the ``--session``/``--last`` options every transcript command takes."""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from typing import Annotated, Any

import orjson
import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.core.errors import CtxError

__all__ = [
    "COLUMNS",
    "CUT",
    "DROPPED",
    "LastOpt",
    "LiveSecondsOpt",
    "ProjectOpt",
    "READABLE",
    "SessionOpt",
    "is_session_file",
    "plain_title",
    "session_input",
    "sessions",
    "sessions_table",
]

SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session",
        "-s",
        metavar="ID",
        help="A Claude Code or Codex session id, or a unique prefix (see 'ctx sessions').",
    ),
]
LastOpt = Annotated[
    bool,
    typer.Option("--last", help="The most recent session of --project (default: this directory)."),
]
ProjectOpt = Annotated[
    str | None,
    typer.Option(
        "--project",
        metavar="DIR",
        help="A project directory ('.' is the current one), or the end of its path.",
    ),
]
LiveSecondsOpt = Annotated[
    int,
    typer.Option(
        "--live-seconds",
        metavar="N",
        min=0,
        help="A session written in the last N seconds is taken as in use and left alone.",
    ),
]


def session_input(
    inputs: list[str] | None, session: str | None, last: bool, project: str | None
) -> list[str] | None:
    """The transcript path(s) the command works on: INPUT, or the session named."""
    if session is None and not last:
        if project is not None:
            raise CtxError("--project chooses a session with --last; add --last or --session.")
        return inputs
    if inputs:
        raise CtxError("give either a file or --session/--last, not both.")
    if session is not None and last:
        raise CtxError("--session and --last both pick a session; use one.")
    from ctxcli.sessions import resolve_session

    return [str(resolve_session(session, last=last, project=project).path)]


def is_session_file(path: str) -> bool:
    """True if ``path`` lies under the clients' session directories."""
    from pathlib import Path

    from ctxcli.services.session_files import is_session_path

    return path != "-" and is_session_path(Path(path))


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal acts on instead of showing: C0 and C1 controls (ESC starts a
window title, a screen clear, an OSC 8 link), DEL, and the bidirectional overrides."""


def printable(text: str) -> str:
    """``text`` as a terminal shows it harmlessly: each control character as its escape.

    Session files hold what a model or a user wrote (titles, branches, ids, summaries);
    ``ctx sessions``, ``ctx validate`` and ``ctx doctor`` print every such text through
    this, so an escape sequence in a file is shown (``\\x1b]0;...``), never run.
    """
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _size(n: int) -> str:
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _tokens(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _cost(before: float | None, after: float | None) -> str:
    if before is None:
        return "?"
    if after is None:
        return f"${before:.2f}"
    return f"${before:.2f}→${after:.2f}"


_SHORT = {
    "torn_last_line": "torn",
    "malformed_line": "malformed",
    "dangling_parent": "dangling",
    "dangling_logical_parent": "dangling",
    "chain_starts_with_assistant": "bad-start",
    "unanswered_call": "unanswered",
    "orphan_result": "orphan",
    "empty_text": "empty-text",
    "unsigned_thinking": "unsigned",
    "duplicate_tool_use_result": "dup-result",
    "oversized_line": "oversized",
}


def _health(row: Any) -> str:
    if row.error:
        return "unreadable"
    labels = list(dict.fromkeys(_SHORT.get(k, k) for k in row.health))
    if len(labels) > 2:
        return f"{','.join(labels[:2])} +{len(labels) - 2}"
    return ",".join(labels) or "ok"


def _project(path: str | None, width: int = 28) -> str:
    if not path:
        return "?"
    home = os.path.expanduser("~")
    if path.startswith(home + os.sep) or path == home:
        path = "~" + path[len(home) :]
    return printable(path if len(path) <= width else "…" + path[-(width - 1) :])


def plain_title(text: str) -> str:
    """A title as plain text: the words of its Markdown, without the marks (``**x**`` is x).

    markdown-it-py (Rich's own Markdown parser) reads it, so what counts as a mark is
    CommonMark's rule, not a guess.
    """
    from markdown_it import MarkdownIt

    parts: list[str] = []
    for token in MarkdownIt("commonmark").parse(text):
        for child in token.children or []:
            if child.type in ("text", "code_inline", "html_inline"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
        if token.type == "inline":
            parts.append(" ")
    return " ".join("".join(parts).split()) or text


def _cells(row: Any, now: float | None) -> tuple[str, ...]:
    from ctxcli.sessions.listing import relative_time

    sid = f"└ {row.id.split('/')[-1]}" if row.parent else row.short_id
    agent = "claude" if row.agent == "claude_code" else row.agent
    cells = (
        sid,
        agent + (" (archived)" if row.archived else ""),
        _project(row.project, 10_000),
        relative_time(row.modified, now),
        f"{row.records:,}",
        _size(row.bytes),
        _tokens(row.tokens),
        _size(row.largest_line_bytes),
        _health(row),
        _cost(row.cost_before, row.cost_after),
        "?" if row.recorded_usd is None else f"${row.recorded_usd:.2f}",
        row.git_branch or "",
        plain_title(row.title) if row.title else "",
    )
    return tuple(printable(cell) for cell in cells)


def sessions_table(rows: list[Any], now: float | None = None, width: int | None = None) -> str:
    """The text table of ``ctx sessions``, fitted to ``width`` (None: as wide as it is).

    The figures are never cut; the id, project, health, branch and title give way (cut
    with an ellipsis, the project at its start, one line per session). When even that
    leaves them too narrow to read, the columns of :data:`DROPPED` are left out in turn.
    """
    from rich.console import Console
    from rich.table import Table

    cells = [_cells(row, now) for row in rows]
    shown = _fitting(cells, width)
    widths = _widths(cells, shown, width)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="", highlight=False)
    for i in shown:
        name, right = COLUMNS[i]
        table.add_column(
            name,
            justify="right" if right else "left",
            no_wrap=True,
            min_width=widths[i],
            max_width=widths[i],
        )
    for n, row_cells in enumerate(cells):
        table.add_row(*(_fit_cell(rows[n], row_cells, i, widths[i]) for i in shown))
    out = io.StringIO()
    Console(file=out, width=width or 10_000, color_system=None, soft_wrap=False).print(table)
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def _fit_cell(row: Any, cells: tuple[str, ...], i: int, width: int) -> str:
    """Cell ``i`` in ``width`` columns: the project cut at its start, the others at the end."""
    from rich.cells import cell_len, set_cell_size

    text = cells[i]
    if cell_len(text) <= width:
        return text
    if COLUMNS[i][0] == "project":
        return _project(row.project, width)
    return set_cell_size(text, width - 1) + "…"


def _widths(cells: list[tuple[str, ...]], shown: list[int], width: int | None) -> dict[int, int]:
    """The width of each shown column: a figure its whole width, the cut columns what is left.

    Each cut column first gets its :data:`READABLE` width (or less, if it needs less),
    then what is left goes to them in the order of :data:`CUT`, each up to its cap.
    """
    natural = {i: _natural(cells, i) for i in shown}
    if width is None:
        return {i: min(natural[i], CUT.get(COLUMNS[i][0]) or natural[i]) for i in shown}
    widths = {
        i: min(natural[i], READABLE[COLUMNS[i][0]]) if COLUMNS[i][0] in CUT else natural[i]
        for i in shown
    }
    room = width - sum(widths.values()) - 2 * (len(shown) - 1)
    by_name = {COLUMNS[i][0]: i for i in shown}
    for name, cap in CUT.items():
        i = by_name.get(name)
        if i is None or room <= 0:
            continue
        more = min(room, min(natural[i], cap or natural[i]) - widths[i])
        widths[i] += max(more, 0)
        room -= max(more, 0)
    return widths


def _fitting(cells: list[tuple[str, ...]], width: int | None) -> list[int]:
    """Choose the columns to show at ``width``.

    The indexes of the columns shown: all, less :data:`DROPPED` while they do not fit
    ``width`` with each cut column at its :data:`READABLE` width.
    """
    shown = list(range(len(COLUMNS)))
    if width is None:
        return shown

    def needed() -> int:
        total = 2 * (len(shown) - 1)
        for i in shown:
            name = COLUMNS[i][0]
            natural = _natural(cells, i)
            total += min(natural, READABLE[name]) if name in CUT else natural
        return total

    for name in DROPPED:
        if needed() <= width:
            break
        shown.remove(next(i for i, (n, _r) in enumerate(COLUMNS) if n == name))
    return shown


def _natural(cells: list[tuple[str, ...]], i: int) -> int:
    """The width column ``i`` takes uncut: its widest cell or its header."""
    from rich.cells import cell_len

    return max([cell_len(COLUMNS[i][0]), *(cell_len(c[i]) for c in cells)])


COLUMNS = (
    ("id", False),
    ("agent", False),
    ("project", False),
    ("modified", False),
    ("records", True),
    ("bytes", True),
    ("tokens", True),
    ("largest", True),
    ("health", False),
    ("resume $", True),
    ("spent $", True),
    ("branch", False),
    ("title", False),
)

CUT: dict[str, int | None] = {
    "project": 28,
    "title": 60,
    "health": 22,
    "id": 38,
    "branch": 20,
}
"""The columns that give way to fit the terminal (cut with an ellipsis), each with the
widest it gets; the room left after the figures goes to them in this order. The figures
are never cut."""

READABLE = {"id": 10, "project": 10, "health": 7, "branch": 8, "title": 12}
"""The narrowest each cut column is still worth reading at."""

DROPPED = (
    "branch",
    "largest",
    "bytes",
    "health",
    "agent",
    "modified",
    "records",
    "project",
    "title",
    "tokens",
    "spent $",
)
"""The columns left out, in this order, of a table too wide for the terminal: the id,
what a resume costs and what the session spent stay longest."""


def sessions(
    agent: Annotated[
        str | None,
        typer.Option("--agent", metavar="AGENT", help="claude or codex (default: both)."),
    ] = None,
    project: ProjectOpt = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only sessions modified since: 30m, 12h, 3d, 2w or a date.",
        ),
    ] = None,
    sort: Annotated[
        str, typer.Option("--sort", metavar="age|size", help="age (newest first) or size.")
    ] = "age",
    archived: Annotated[
        bool, typer.Option("--archived", help="Include archived Codex sessions.")
    ] = False,
    exact: Annotated[
        bool,
        typer.Option("--exact", help="Count tokens with the tokenizer, not chars/4 (slower)."),
    ] = False,
    prices: Annotated[
        str | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help="TOML price table (USD per million tokens by model; see 'ctx cost').",
        ),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Read every session again (no listing cache).")
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", "-j", metavar="N", min=1, help="Processes reading sessions not yet cached."
        ),
    ] = 1,
) -> None:
    """List the Claude Code and Codex sessions on this machine.

    Columns: a short id (any unique prefix works with --session), the agent, the
    project, when it was last modified, records, bytes, model-visible tokens, the
    largest line, health (what 'ctx doctor' would report), what one resume costs
    before -> after 'ctx reduce' (uncached input, from a price table you can
    override), what the session spent (its recorded usage, each API response once,
    as 'ctx cost' prices it), the git branch and the first prompt or the client's summary.
    Subagents are listed under their session.

    Example:

    \b
        ctx sessions --project . --since 3d
        ctx sessions --sort size --json
    """
    from ctxcli.sessions import SessionQuery, list_sessions, load_price_table, parse_since

    with _errors():
        table = load_price_table(prices)
        query = SessionQuery(
            agent=agent,
            project=project,
            since=parse_since(since) if since else None,
            archived=archived,
            exact=exact,
            sort=sort,
        )
        with console.progress("reading sessions", enabled=not json) as bar:
            rows = list_sessions(query, prices=table, cache=not no_cache, jobs=jobs, progress=bar)
        if json:
            payload = {"sessions": [r.to_dict() for r in rows], "count": len(rows)}
            console.write_stdout(orjson.dumps(payload) + b"\n")
            return
        if not rows:
            sys.stderr.write("ctx: no sessions found\n")
            return
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        if os.environ.get("COLUMNS", "").isdigit():
            width = int(os.environ["COLUMNS"])
        sys.stdout.write(sessions_table(rows, width=width))
