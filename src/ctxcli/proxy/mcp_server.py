"""``ctx mcp``: an MCP server (stdio) giving an agent the proxy's offloaded originals and stats.

Two tools, built on the official ``mcp`` SDK: ``retrieve`` reads an offloaded file (the path
a ctx hint names, absolute or relative to the offload directory; a window of lines), and
``stats`` returns what the proxy has saved so far (the JSON the proxy writes next to the
offloaded files after every request).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from ctxcli.core.errors import CtxError
from ctxcli.proxy.engine import STATS_FILE


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


def retrieve(offload_dir: str | Path, path: str, offset: int = 0, limit: int | None = None) -> str:
    """Lines ``offset`` .. ``offset + limit`` of an offloaded file (all of it by default).

    Raises:
        CtxError: the path is outside the offload directory or does not exist.
    """
    target = _inside(Path(offload_dir), path)
    text = target.read_text(encoding="utf-8", errors="replace")
    if offset == 0 and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    end = None if limit is None else offset + limit
    return "".join(lines[offset:end])


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
    )

    @server.tool()
    def ctx_retrieve(path: str, offset: int = 0, limit: int | None = None) -> str:
        """Read an offloaded original named by a ctx hint (optionally a window of lines)."""
        return retrieve(offload_dir, path, offset, limit)

    @server.tool()
    def ctx_stats() -> str:
        """What the ctx proxy has saved so far: tokens and cache-priced cost, with and without."""
        return json.dumps(read_stats(offload_dir), indent=2)

    return server


def run_stdio(offload_dir: str | Path) -> None:
    """Serve MCP over stdin/stdout until the client closes it."""
    build_server(offload_dir).run("stdio")
