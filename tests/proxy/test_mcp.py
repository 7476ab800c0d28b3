"""``ctx mcp`` through the real MCP SDK client over stdio: reasons reach the agent, windows are bounded.

The server runs as ``python -m ctxcli mcp`` (what ``claude mcp add`` starts); its stderr
goes to a file the test reads, as an MCP client's log would.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import CtxError
from ctxcli.proxy.mcp_server import DEFAULT_LIMIT_LINES, MAX_CHARS, MAX_LIMIT_LINES, retrieve
from support.paths import SHARED, need_shared

SESSION = SHARED / "cc_spotter_4d5611e5.jsonl"


def call_over_stdio(offload: Path, calls: list[dict[str, Any]], errlog: Path) -> list[Any]:
    """Start ``ctx mcp`` and make ``calls`` of ctx_retrieve; the results, in order."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxcli", "mcp", "--offload-dir", str(offload)]
    )

    async def run() -> list[Any]:
        with errlog.open("w") as log:
            async with Client(stdio_client(params, errlog=log)) as client:
                return [await client.call_tool("ctx_retrieve", args) for args in calls]

    return asyncio.run(run())


def test_retrieve_errors_reach_the_agent_with_their_reason(tmp_path: Path) -> None:
    offload = tmp_path / "off"
    (offload / "clear").mkdir(parents=True)
    (offload / "clear" / "t1").write_text("line 0\nline 1\n")
    errlog = tmp_path / "mcp.err"
    results = call_over_stdio(
        offload,
        [
            {"path": "/etc/passwd"},
            {"path": "clear/missing"},
            {"path": "clear/t1", "offset": -1},
            {"path": "clear/t1", "limit": -5},
            {"path": "clear/t1", "limit": MAX_LIMIT_LINES + 1},
            {"path": "clear/t1", "offset": 1},
        ],
        errlog,
    )
    texts = [r.content[0].text for r in results]
    assert [r.is_error for r in results] == [True, True, True, True, True, False]
    assert "not inside the offload directory" in texts[0]
    assert "no such offloaded file" in texts[1]
    assert "offset" in texts[2] and "greater than or equal to 0" in texts[2]
    assert "limit" in texts[3] and "greater than or equal to 1" in texts[3]
    assert "limit" in texts[4] and f"less than or equal to {MAX_LIMIT_LINES}" in texts[4]
    assert texts[5] == "line 1\n"
    assert "Traceback" not in errlog.read_text()


def _real_text(min_chars: int) -> str:
    """Real tool output from a Claude Code session, repeated to ``min_chars``."""
    need_shared()
    text = SESSION.read_text(encoding="utf-8")
    return text * (min_chars // len(text) + 1)


def test_a_large_file_comes_back_a_bounded_window_at_a_time(tmp_path: Path) -> None:
    offload = tmp_path / "off"
    (offload / "clear").mkdir(parents=True)
    big = _real_text(50 * 1024 * 1024)
    (offload / "clear" / "big").write_text(big, encoding="utf-8")
    lines = big.splitlines(keepends=True)
    errlog = tmp_path / "mcp.err"
    first, second = call_over_stdio(
        offload, [{"path": "clear/big"}, {"path": "clear/big", "offset": 5, "limit": 3}], errlog
    )
    text = first.content[0].text
    assert not first.is_error and len(text) <= MAX_CHARS + 200
    shown, trailer = text.rsplit("\n[ctx: ", 1)
    assert big.startswith(shown)
    end = len(shown.splitlines())
    assert end <= DEFAULT_LIMIT_LINES
    assert trailer == f"lines 0-{end - 1} shown; read on with offset={end}]"
    assert (
        second.content[0].text
        == "".join(lines[5:8]) + "[ctx: lines 5-7 shown; read on with offset=8]"
    )


def test_the_library_call_checks_its_window(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x\n" * 10)
    assert retrieve(tmp_path, "a", offset=8) == "x\nx\n"
    assert retrieve(tmp_path, "a", offset=20) == ""
    for bad in ({"offset": -1}, {"limit": 0}, {"limit": MAX_LIMIT_LINES + 1}):
        with pytest.raises(CtxError):
            retrieve(tmp_path, "a", **bad)
    one_line = "y" * (MAX_CHARS * 2)
    (tmp_path / "b").write_text(one_line)
    got = retrieve(tmp_path, "b")
    assert got.startswith("y" * MAX_CHARS) and "line 0 is cut at" in got
