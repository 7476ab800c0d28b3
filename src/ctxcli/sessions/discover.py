"""Find the agent sessions stored on this machine and resolve an id to one of them.

Claude Code keeps one JSONL file per session in ``$CLAUDE_CONFIG_DIR/projects/<slug>/``
(default ``~/.claude``), its subagents in ``<session id>/subagents/agent-<id>.jsonl``
(2.1.x) or ``agent-<id>.jsonl`` beside the session (2.0.x), and newer builds an index,
``sessions-index.json``, per project directory. Codex keeps rollouts in
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<date>-<id>.jsonl`` (default ``~/.codex``) and
moves archived ones to ``$CODEX_HOME/archived_sessions/``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ctxcli.core.errors import CtxError
from ctxcli.services.session_files import CLAUDE as CLAUDE
from ctxcli.services.session_files import CODEX as CODEX
from ctxcli.services.session_files import INDEX, claude_home, codex_home

__all__ = [
    "AGENTS",
    "AGENT_NAMES",
    "SessionFile",
    "agent_name",
    "find_sessions",
    "match_project",
    "parse_since",
    "project_path",
    "resolve_session",
    "session_project",
    "short_ids",
]

AGENTS = (CLAUDE, CODEX)
_ROLLOUT_ID = re.compile(
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", re.I
)


@dataclass(frozen=True)
class SessionFile:
    """One session file found on disk (nothing read from it yet but its stat)."""

    id: str
    agent: str
    path: Path
    size: int
    mtime_ns: int
    parent: str | None = None
    """The parent session's id, for a subagent file."""
    archived: bool = False
    index: dict[str, Any] | None = None
    """The client's ``sessions-index.json`` entry, when present and not stale."""

    @property
    def mtime(self) -> float:
        """Last modification, seconds since the epoch."""
        return self.mtime_ns / 1e9


def _stat(path: Path) -> os.stat_result | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st if path.is_file() else None


def _read_index(project_dir: Path) -> dict[str, dict[str, Any]]:
    """The entries of a project's ``sessions-index.json`` by session id (empty if none)."""
    try:
        data = orjson.loads((project_dir / INDEX).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return {}
    return {
        e["sessionId"]: e
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("sessionId"), str)
    }


def _fresh(entry: dict[str, Any] | None, st: os.stat_result) -> dict[str, Any] | None:
    """The index entry if it still describes the file (its ``fileMtime`` matches)."""
    if entry is None:
        return None
    mtime = entry.get("fileMtime")
    if isinstance(mtime, int | float) and abs(mtime - st.st_mtime_ns / 1e6) < 2:
        return entry
    return None


def _claude_files() -> Iterator[SessionFile]:
    projects = claude_home() / "projects"
    if not projects.is_dir():
        return
    for project in sorted(p for p in projects.iterdir() if p.is_dir()):
        index = _read_index(project)
        for path in sorted(project.glob("*.jsonl")):
            st = _stat(path)
            if st is None:
                continue
            stem = path.stem
            if stem.startswith("agent-"):
                # 2.0.x: a subagent beside its session; the parent is named inside.
                yield SessionFile(
                    stem, CLAUDE, path, st.st_size, st.st_mtime_ns, parent=_first_session_id(path)
                )
                continue
            yield SessionFile(
                stem,
                CLAUDE,
                path,
                st.st_size,
                st.st_mtime_ns,
                index=_fresh(index.get(stem), st),
            )
            for sub in sorted((project / stem / "subagents").glob("agent-*.jsonl")):
                sst = _stat(sub)
                if sst is not None:
                    yield SessionFile(
                        f"{stem}/{sub.stem}", CLAUDE, sub, sst.st_size, sst.st_mtime_ns, parent=stem
                    )


def _head_records(path: Path, lines: int) -> Iterator[dict[str, Any]]:
    """The JSON objects among the first ``lines`` lines of a file (unreadable: none)."""
    try:
        with open(path, "rb") as fh:
            for _ in range(lines):
                line = fh.readline(4 << 20)
                if not line:
                    return
                try:
                    data = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(data, dict):
                    yield data
    except OSError:
        return


def _first_session_id(path: Path) -> str | None:
    """The ``sessionId`` (or Codex ``session_meta`` id) named in the first lines."""
    for data in _head_records(path, 20):
        if isinstance(data.get("sessionId"), str):
            return str(data["sessionId"])
        payload = data.get("payload")
        if data.get("type") == "session_meta" and isinstance(payload, dict):
            pid = payload.get("id")
            if isinstance(pid, str):
                return pid
    return None


def _codex_files(archived: bool) -> Iterator[SessionFile]:
    home = codex_home()
    dirs = [(home / "sessions", False)]
    if archived:
        dirs.append((home / "archived_sessions", True))
    for root, is_archived in dirs:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("rollout-*.jsonl")):
            st = _stat(path)
            if st is None:
                continue
            match = _ROLLOUT_ID.search(path.name)
            sid = match.group(1) if match else (_first_session_id(path) or path.stem)
            yield SessionFile(sid, CODEX, path, st.st_size, st.st_mtime_ns, archived=is_archived)


def find_sessions(*, agent: str | None = None, archived: bool = False) -> list[SessionFile]:
    """Every session file of the clients on this machine (subagents after their parent).

    Raises:
        CtxError: ``agent`` is not a known client.
    """
    agent = agent_name(agent)
    found: list[SessionFile] = []
    if agent in (None, CLAUDE):
        found.extend(_claude_files())
    if agent in (None, CODEX):
        found.extend(_codex_files(archived))
    return found


AGENT_NAMES = {"claude": CLAUDE, CLAUDE: CLAUDE, CODEX: CODEX}
"""The names an agent goes by: ``claude``, as ``ctx sessions`` shows it, or its format's."""


def agent_name(agent: str | None) -> str | None:
    """The client ``agent`` names (``claude`` is ``claude_code``); None stays None.

    Raises:
        CtxError: ``agent`` is not a known client.
    """
    if agent is None:
        return None
    if agent not in AGENT_NAMES:
        raise CtxError(f"unknown agent {agent!r}: use one of {', '.join(AGENT_NAMES)}.")
    return AGENT_NAMES[agent]


def short_ids(ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
    """The shortest prefix (at least ``minimum`` characters) that names each id alone."""
    ids = sorted(set(ids))
    out: dict[str, str] = {}
    for i, sid in enumerate(ids):
        common = 0
        for other in (ids[i - 1] if i else None, ids[i + 1] if i + 1 < len(ids) else None):
            if other is None:
                continue
            n = 0
            while n < min(len(sid), len(other)) and sid[n] == other[n]:
                n += 1
            common = max(common, n)
        out[sid] = sid[: max(minimum, common + 1)]
    return out


def resolve_session(
    ref: str | None = None,
    *,
    last: bool = False,
    project: str | None = None,
    agent: str | None = None,
    sessions: list[SessionFile] | None = None,
) -> SessionFile:
    """The one session an id, a unique id prefix or ``last`` names.

    ``last`` picks the most recently modified session of ``project`` (default: the
    current directory's); subagent files are never picked by ``last``.

    Raises:
        CtxError: nothing matches, or a prefix matches several sessions (the message
            lists the candidates).
    """
    pool = sessions if sessions is not None else find_sessions(agent=agent, archived=True)
    if last:
        where = match_project(project or ".", pool)
        candidates = [
            s for s in pool if s.parent is None and not s.archived and session_project(s) == where
        ]
        if not candidates:
            raise CtxError(
                f"no session of the project {where} was found; list them all with "
                "'ctx sessions' and pick one by id."
            )
        return max(candidates, key=lambda s: s.mtime_ns)
    if not ref:
        raise CtxError("no session given: pass a session id or a unique prefix of one.")
    exact = [s for s in pool if s.id == ref or ref in _names(s)]
    # A subagent is named by its own id (agent-a2898e3..., or a2898e3... as the file
    # name and `ctx sessions` show it without the prefix), not by its parent's prefix.
    matches = exact or [s for s in pool if any(n.startswith(ref) for n in _names(s))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CtxError(
            f"no session id starts with {ref!r} ({len(pool)} sessions searched); "
            "run 'ctx sessions' to list them."
        )
    shown = ", ".join(f"{s.id} ({s.agent}, {s.path})" for s in matches[:10])
    more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
    raise CtxError(f"{ref!r} matches {len(matches)} sessions: {shown}{more}; give more of the id.")


def _names(session: SessionFile) -> tuple[str, ...]:
    """The ids a session answers to: its own, and a subagent's without ``agent-``."""
    own = session.id.split("/")[-1]
    return (own, own[len("agent-") :]) if own.startswith("agent-") else (own,)


def project_path(project: str) -> str:
    """An absolute, normalised project path (``.`` is the current directory)."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(project)))


def match_project(project: str, sessions: Iterable[SessionFile]) -> str:
    """The project directory ``project`` names among the sessions' projects.

    A path names itself; a relative one that is no session's project (``spotter-dov``,
    ``worktrees/spotter-dov``) names the one project whose path ends with it, whole
    components only (what the cut column of ``ctx sessions`` shows).

    Raises:
        CtxError: several projects end with it (the message lists them).
    """
    where = project_path(project)
    known = {p for s in sessions if (p := session_project(s)) is not None}
    if where in known or os.path.isabs(os.path.expanduser(project)):
        return where
    tail = os.sep + os.path.normpath(project).strip(os.sep)
    found = sorted(p for p in known if p.endswith(tail))
    if len(found) > 1:
        raise CtxError(
            f"project {project!r} matches {len(found)} projects: {', '.join(found)}; "
            "give more of the path."
        )
    return found[0] if found else where


_PROJECT_CACHE: dict[tuple[str, int], str | None] = {}


def session_project(session: SessionFile) -> str | None:
    """The working directory the session ran in (its project)."""
    if session.index and isinstance(session.index.get("projectPath"), str):
        return os.path.normpath(str(session.index["projectPath"]))
    key = (str(session.path), session.mtime_ns)
    if key not in _PROJECT_CACHE:
        _PROJECT_CACHE[key] = _first_cwd(session.path)
    return _PROJECT_CACHE[key]


def _first_cwd(path: Path) -> str | None:
    for data in _head_records(path, 50):
        cwd = data.get("cwd")
        if not isinstance(cwd, str) and isinstance(data.get("payload"), dict):
            cwd = data["payload"].get("cwd")
        if isinstance(cwd, str) and cwd:
            return os.path.normpath(cwd)
    return None


def parse_since(value: str, now: float | None = None) -> float:
    """Seconds since the epoch for ``30m``, ``12h``, ``3d``, ``2w`` or an ISO date.

    Raises:
        CtxError: the value is neither.
    """
    now = time.time() if now is None else now
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", value)
    if match:
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
        return now - float(match.group(1)) * unit
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CtxError(
            f"since {value!r} is invalid: use a duration such as 30m, 12h, 3d, 2w "
            "or a date such as 2026-01-31."
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.timestamp()
