"""``ctx mcp``: an MCP server (stdio) to read back offloaded text and the proxy's savings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.proxy import load_proxy
from ctxcli.core.errors import CtxError

__all__ = ["mcp"]


def mcp(
    offload_dir: Annotated[
        Path,
        typer.Option(
            "--offload-dir",
            metavar="DIR",
            help="The offload directory the proxy writes.",
            file_okay=False,
        ),
    ],
) -> None:
    """Serve the ctx_retrieve and ctx_stats tools over MCP (stdio).

    ctx_retrieve answers a window of an offloaded file: 2,000 lines by default, at most
    10,000 and 100,000 characters, saying which offset reads on.

    Example:

    \b
        ctx mcp --offload-dir ~/.cache/ctx/proxy/run-abc
    """
    with _errors():
        load_proxy()
        if not offload_dir.is_dir():
            raise CtxError(f"{offload_dir}: no such directory; give the proxy's offload directory")
        from ctxcli.proxy.mcp_server import run_stdio

        run_stdio(offload_dir.resolve())
