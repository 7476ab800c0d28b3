"""``ctx mcp``: an MCP server (stdio) giving an agent the proxy's offloaded originals and stats.

Two tools, built on the official ``mcp`` SDK: ``ctx_retrieve`` reads an offloaded file (the
path a ctx hint names, absolute or relative to the offload directory), and ``ctx_stats``
returns what the proxy has saved so far (the JSON the proxy writes next to the offloaded
files after every request).

``ctx_retrieve`` answers a window of lines: ``offset`` (from 0) and ``limit``, by default
:data:`DEFAULT_LIMIT_LINES` lines, at most :data:`MAX_LIMIT_LINES`, and never more than
:data:`MAX_CHARS` characters (about 25,000 tokens, Claude Code's default limit for one MCP
tool result); a window that stops before the file ends says which offset reads on. The
file is read as a stream, so a huge one costs only its window. A refused call (a path
outside the offload directory, a missing file, a negative offset) comes back to the agent
as a tool error carrying the reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ctxcli.core.errors import CtxError
from ctxcli.proxy.engine import STATS_FILE

__all__ = [
    "DEFAULT_LIMIT_LINES",
    "MAX_CHARS",
    "MAX_LIMIT_LINES",
    "build_server",
    "read_stats",
    "retrieve",
    "run_stdio",
]

DEFAULT_LIMIT_LINES = 2000
"""Lines ``ctx_retrieve`` answers when no limit is given (as Claude Code's Read tool)."""

MAX_LIMIT_LINES = 10_000
"""The largest ``limit`` ``ctx_retrieve`` takes."""

MAX_CHARS = 100_000
"""The most characters one ``ctx_retrieve`` answer holds (a longer line is cut)."""


def _inside(root: Path, path: str) -> Path:
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise CtxError(f"{path}: not inside the offload directory {root}; give a path a hint names")
    if not resolved.is_file():
        raise CtxError(f"{path}: no such offloaded file in {root}")
    return resolved


def retrieve(
    offload_dir: str | Path, path: str, offset: int = 0, limit: int = DEFAULT_LIMIT_LINES
) -> str:
    """Lines ``offset`` .. ``offset + limit`` of an offloaded file, at most :data:`MAX_CHARS`.

    When the window stops before the file ends, a last line says which offset reads on.

    Raises:
        CtxError: the path is outside the offload directory or does not exist, or the
            window is out of range.
    """
    if offset < 0:
        raise CtxError(f"offset {offset} is invalid: must be >= 0")
    if not 1 <= limit <= MAX_LIMIT_LINES:
        raise CtxError(f"limit {limit} is invalid: must be between 1 and {MAX_LIMIT_LINES}")
    target = _inside(Path(offload_dir), path)
    with target.open(encoding="utf-8", errors="replace", newline="") as fh:
        return _window(_lines(fh), offset, limit)


def _lines(fh: Any) -> Iterator[str]:
    """The lines of ``fh`` with their ends, never more than :data:`MAX_CHARS` + 1 at a time."""
    while line := fh.readline(MAX_CHARS + 1):
        yield line


def _window(lines: Iterator[str], offset: int, limit: int) -> str:
    shown: list[str] = []
    size = 0
    number = -1
    for number, line in enumerate(lines):
        if number < offset:
            continue
        if len(shown) == limit or (shown and size + len(line) > MAX_CHARS):
            end = offset + len(shown)
            return (
                "".join(shown) + f"[ctx: lines {offset}-{end - 1} shown; read on with offset={end}]"
            )
        if len(line) > MAX_CHARS:  # one line longer than a whole answer: its head
            return line[:MAX_CHARS] + f"\n[ctx: line {number} is cut at {MAX_CHARS:,} characters]"
        shown.append(line)
        size += len(line)
    return "".join(shown)


def read_stats(offload_dir: str | Path) -> dict[str, Any]:
    """The proxy's latest stats for this offload directory ({} before the first request)."""
    target = Path(offload_dir) / STATS_FILE
    if not target.is_file():
        return {}
    data: dict[str, Any] = json.loads(target.read_text())
    return data


def build_server(offload_dir: str | Path) -> MCPServer:
    """The MCP server for ``offload_dir``."""
    server: MCPServer = MCPServer(
        "ctx",
        instructions="Read back text that ctx offloaded from the conversation, and ctx's savings.",
        log_level="WARNING",  # a refused call is the agent's to read, not a line on stderr
    )

    @server.tool()
    def ctx_retrieve(
        path: str,
        offset: Annotated[int, Field(ge=0, description="First line to read (from 0).")] = 0,
        limit: Annotated[
            int, Field(ge=1, le=MAX_LIMIT_LINES, description="Lines to read at most.")
        ] = DEFAULT_LIMIT_LINES,
    ) -> str:
        """Read an offloaded original named by a ctx hint, a window of lines at a time.

        At most 100,000 characters come back; a window that stops early says which
        offset reads on.
        """
        try:
            return retrieve(offload_dir, path, offset, limit)
        except CtxError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def ctx_stats() -> str:
        """What the ctx proxy has saved so far: tokens and cache-priced cost, with and without."""
        return json.dumps(read_stats(offload_dir), indent=2)

    return server


def run_stdio(offload_dir: str | Path) -> None:
    """Serve MCP over stdin/stdout until the client closes it."""
    build_server(offload_dir).run("stdio")
