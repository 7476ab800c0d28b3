"""The agent clients' session files: where they live, which file is one, its agent and id.

Claude Code keeps one JSONL file per session in ``$CLAUDE_CONFIG_DIR/projects/<slug>/``
(default ``~/.claude``), beside a ``sessions-index.json`` in newer builds; Codex keeps
rollouts in ``$CODEX_HOME/sessions/...`` and ``$CODEX_HOME/archived_sessions/`` (default
``~/.codex``). The library changes such a file in place the way it changes any file; what
it must know about sessions is here, below the library, so that it never depends on the
``sessions`` commands.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxcli.core.errors import CtxError
from ctxcli.core.io import Input

__all__ = [
    "CLAUDE",
    "CODEX",
    "INDEX",
    "claude_home",
    "codex_home",
    "count_messages",
    "identify",
    "is_session_path",
    "session_roots",
    "sniff_agent",
    "update_index",
]

CLAUDE = "claude_code"
CODEX = "codex"
INDEX = "sessions-index.json"
_CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_HEAD_BYTES = 1 << 20


def claude_home() -> Path:
    """``$CLAUDE_CONFIG_DIR`` or ``~/.claude``."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def codex_home() -> Path:
    """``$CODEX_HOME`` or ``~/.codex``."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def session_roots() -> list[Path]:
    """The directories sessions live under, resolved."""
    home = codex_home()
    roots = [claude_home() / "projects", home / "sessions", home / "archived_sessions"]
    return [r.resolve() for r in roots]


def is_session_path(path: Path) -> bool:
    """True if ``path`` lies under one of the clients' session directories.

    A link there is a session file wherever the file it names lives (the client reads
    it through the link).
    """
    places = [path.resolve(), Path(os.path.abspath(path))]
    return any(root in place.parents for root in session_roots() for place in places)


def sniff_agent(datas: Sequence[Any]) -> str | None:
    """``claude_code``, ``codex`` or None, from the parsed records."""
    for data in datas[:50]:
        if not isinstance(data, dict):
            continue
        if "payload" in data and data.get("type") in _CODEX_TYPES:
            return CODEX
        if isinstance(data.get("type"), str) and (
            "uuid" in data or "sessionId" in data or "leafUuid" in data
        ):
            return CLAUDE
    return None


def identify(path: Path, raw: Input) -> tuple[str, str]:
    """The agent and session id of a session file whose bytes are ``raw``.

    Raises:
        CtxError: the file is neither a Claude Code session nor a Codex rollout.
    """
    datas: list[Any] = []
    for line in raw[:_HEAD_BYTES].split(b"\n")[:200]:
        try:
            datas.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            datas.append(None)
    agent = sniff_agent(datas)
    if agent == CLAUDE:
        return agent, _claude_id(path, datas)
    if agent == CODEX:
        for d in datas:
            if isinstance(d, dict) and d.get("type") == "session_meta":
                payload = d.get("payload")
                if isinstance(payload, dict) and isinstance(payload.get("id"), str):
                    return agent, payload["id"]
        return agent, path.stem
    raise CtxError(
        f"{path}: not a Claude Code session or a Codex rollout; "
        "only agent sessions can be changed in place this way."
    )


def _claude_id(path: Path, datas: list[Any]) -> str:
    """A Claude Code session's id; ``<session id>/agent-<id>`` for a subagent."""
    if path.stem.startswith("agent-"):
        parent = path.parent.parent.name if path.parent.name == "subagents" else None
        sid = next(
            (d["sessionId"] for d in datas if isinstance(d, dict) and "sessionId" in d),
            parent,
        )
        return f"{sid or path.parts[-2]}/{path.stem}"
    return next(
        (
            d["sessionId"]
            for d in datas
            if isinstance(d, dict) and isinstance(d.get("sessionId"), str)
        ),
        path.stem,
    )


def update_index(path: Path, write: Callable[[Path, bytes], None]) -> bool:
    """Keep the client's ``sessions-index.json`` entry consistent with the file.

    The JSONL file is authoritative (some Claude Code versions stopped writing the
    index); readers of the index compare ``fileMtime`` with the file to tell a stale
    entry and show ``messageCount``. Only an existing entry is updated, through
    ``write(path, bytes)`` (an atomic write); returns True if one was.
    """
    index = path.parent / INDEX
    try:
        text = index.read_bytes()
        data = orjson.loads(text)
    except (OSError, orjson.JSONDecodeError):
        return False
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return False
    sid = path.stem
    entry = next(
        (
            e
            for e in entries
            if isinstance(e, dict) and (e.get("sessionId") == sid or e.get("fullPath") == str(path))
        ),
        None,
    )
    if entry is None:
        return False
    # fileMtime (milliseconds) is how a reader tells a current entry from a stale one;
    # messageCount counts user and assistant records. ``modified`` is the time of the
    # conversation's last activity, which a rewrite does not change: left alone.
    entry["fileMtime"] = path.stat().st_mtime_ns // 1_000_000
    entry["messageCount"] = count_messages(path.read_bytes())
    option = orjson.OPT_INDENT_2 if b"\n" in text.strip() else 0
    write(index, orjson.dumps(data, option=option))
    return True


def count_messages(raw: bytes) -> int:
    """User and assistant records, the count the index's ``messageCount`` holds."""
    count = 0
    for line in raw.split(b"\n"):
        if b'"type":"user"' in line or b'"type":"assistant"' in line:
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(data, dict) and data.get("type") in ("user", "assistant"):
                count += 1
    return count
