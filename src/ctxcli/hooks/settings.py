"""Install ctx's hooks into a client's settings file, and give the file back.

Claude Code reads hooks from ``.claude/settings.json`` (the project's, shared),
``.claude/settings.local.json`` (the project's, personal) and ``settings.json`` in its
configuration directory (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``); Codex from
``.codex/hooks.json`` and ``$CODEX_HOME/hooks.json``. Both use one layout::

    {"hooks": {"PostToolUse": [{"matcher": "...", "hooks": [{"type": "command", ...}]}]}}

:func:`install` adds ctx's groups and keeps everything else: the user's own hooks and
settings, the key order and the file's indentation (as far as JSON allows: the file is
written again through ``json``). Installing twice changes nothing. The first install
keeps the file's bytes (or that there was none) in ctx's data directory, keyed by the
file's path; :func:`uninstall` writes them back byte for byte (or removes the file ctx
created) when the file is still what ctx wrote, and otherwise takes only ctx's groups
out, keeping the user's later edits. In the user's own Claude Code settings it also adds
ctx's offload folder to ``permissions.additionalDirectories``: the files the hints cite lie
outside the project; Claude Code's Read opens them anyway, but ``cat`` through Bash only
in a working directory, and Claude Code 2.1.331 takes that grant from the user's settings
only (a project's, shared or local, is ignored). Codex can snapshot before a compaction but cannot
replace a tool's output, so only ``PreCompact`` is wired there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ctxcli.core.errors import ConfigError
from ctxcli.hooks.post_tool_use import HOOKS
from ctxcli.services.dirs import data_dir, private_dir
from ctxcli.services.session_files import claude_home, codex_home

__all__ = [
    "CLIENTS",
    "Change",
    "Installed",
    "Scope",
    "Status",
    "client_version",
    "default_command",
    "offloads_dir",
    "install",
    "settings_path",
    "status",
    "uninstall",
]

CLIENTS = ("claude", "codex")
POST_TOOL_MATCHER = "Bash|Read|Grep|Glob|WebFetch|mcp__.*"
"""The tools whose outputs the hook knows the shape of: others never start it."""
EVENTS = {"claude": ("PostToolUse", "PreCompact"), "codex": ("PreCompact",)}
_RUN = {"PostToolUse": "post-tool-use", "PreCompact": "pre-compact"}
_TIMEOUT_S = {"PostToolUse": 30, "PreCompact": 120}
_OURS = re.compile(r"(?:^|[\s/])(?:ctx|ctxcli)\s+hooks\s+run\s+(post-tool-use|pre-compact)\s*$")


class Scope(StrEnum):
    """Which settings file: the project's shared one, its personal one, or the user's."""

    PROJECT = "project"
    LOCAL = "local"
    GLOBAL = "global"


@dataclass(frozen=True)
class Change:
    """What :func:`install` or :func:`uninstall` did to one file.

    ``action`` is ``installed``, ``unchanged``, ``restored`` (the original bytes written
    back), ``removed`` (ctx had created the file), ``cleaned`` (the file changed since
    ctx wrote it: only ctx's groups were taken out) or ``absent`` (nothing of ctx's there).
    """

    client: str
    path: Path
    action: str
    events: tuple[str, ...] = ()


@dataclass(frozen=True)
class Installed:
    """One settings file and the ctx hooks found in it."""

    client: str
    scope: Scope
    path: Path
    exists: bool
    events: tuple[str, ...]


@dataclass(frozen=True)
class Status:
    """What is installed where, and which clients are on PATH (None: not found)."""

    files: tuple[Installed, ...]
    versions: dict[str, str | None]


def settings_path(client: str, scope: Scope, project: Path) -> Path:
    """The settings file of ``client`` for ``scope`` (``project``: the project's root).

    Raises:
        ConfigError: the client is unknown, or has no file for that scope.
    """
    if client == "claude":
        if scope is Scope.GLOBAL:
            return claude_home() / "settings.json"
        name = "settings.local.json" if scope is Scope.LOCAL else "settings.json"
        return project / ".claude" / name
    if client == "codex":
        if scope is Scope.LOCAL:
            raise ConfigError(
                "Codex has no personal project settings file; use the project or global scope."
            )
        return (codex_home() if scope is Scope.GLOBAL else project / ".codex") / "hooks.json"
    raise ConfigError(f"unknown client {client!r}; expected one of: {', '.join(CLIENTS)}.")


def default_command() -> str:
    """How a hook starts ctx: ``ctx`` when it is on PATH, else this interpreter."""
    if shutil.which("ctx"):
        return "ctx"
    return f"{_quote(sys.executable)} -m ctxcli"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- reading and writing the file -----------------------------------------------------------


def _load(path: Path) -> tuple[bytes | None, dict[str, Any]]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc}).") from None
    if not raw.strip():
        return raw, {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix the file, then install again."
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8; fix the file, then install again.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object of settings; fix the file.")
    return raw, data


def _indent(raw: bytes | None) -> str | int:
    """The indentation of the file's first indented line (two spaces for a new file)."""
    if raw:
        match = re.search(rb"\n([ \t]+)\S", raw)
        if match:
            return match.group(1).decode()
        if b"\n" not in raw.strip():
            return 2
    return 2


def _dump(data: dict[str, Any], raw: bytes | None) -> bytes:
    text = json.dumps(data, indent=_indent(raw), ensure_ascii=False)
    newline = raw is None or raw.endswith(b"\n") or not raw.strip()
    return (text + ("\n" if newline else "")).encode("utf-8")


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, keeping an existing file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- the record of the original -------------------------------------------------------------


def _record_path(path: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return data_dir() / "hooks" / "settings" / f"{key}.json"


def _keep_original(path: Path, raw: bytes | None, written: bytes) -> None:
    record = _record_path(path)
    private_dir(record.parent)
    body = {
        "path": str(path.resolve()),
        "original": None if raw is None else base64.b64encode(raw).decode(),
        "written_sha256": hashlib.sha256(written).hexdigest(),
    }
    fd, tmp = tempfile.mkstemp(dir=record.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(body, fh)
    os.replace(tmp, record)


def _original(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_record_path(path).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- the hooks ------------------------------------------------------------------------------


def _ours(group: Any) -> str | None:
    """The ctx event a hook group runs, or None if it is not ctx's."""
    if not isinstance(group, dict):
        return None
    for hook in group.get("hooks") or []:
        if isinstance(hook, dict) and isinstance(hook.get("command"), str):
            match = _OURS.search(hook["command"])
            if match:
                return match.group(1)
    return None


def _installed(data: dict[str, Any]) -> tuple[str, ...]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return ()
    return tuple(
        event
        for event, groups in hooks.items()
        if isinstance(groups, list) and any(_ours(g) for g in groups)
    )


def offloads_dir() -> str:
    """The folder the hooks offload into by default, as the settings name it."""
    return str(data_dir() / HOOKS)


def _reads_offloads(data: dict[str, Any]) -> bool:
    permissions = data.get("permissions")
    dirs = permissions.get("additionalDirectories") if isinstance(permissions, dict) else None
    return isinstance(dirs, list) and offloads_dir() in dirs


def _let_read_offloads(path: Path, data: dict[str, Any]) -> None:
    """Let Bash read the files the hints cite: they are outside the project.

    Claude Code lets Bash ``cat`` files only in the session's working directories;
    ``permissions.additionalDirectories`` of the user's settings adds one.
    """
    permissions = data.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise ConfigError(f'{path}: "permissions" is not an object; fix the file.')
    dirs = permissions.setdefault("additionalDirectories", [])
    if not isinstance(dirs, list):
        raise ConfigError(
            f'{path}: "permissions.additionalDirectories" is not a list; fix the file.'
        )
    dirs.append(offloads_dir())
    private_dir(Path(offloads_dir()))  # Claude Code ignores a folder that does not exist


def _forget_offloads(data: dict[str, Any]) -> None:
    permissions = data.get("permissions")
    if not isinstance(permissions, dict):
        return
    dirs = permissions.get("additionalDirectories")
    if isinstance(dirs, list) and offloads_dir() in dirs:
        dirs.remove(offloads_dir())
        if not dirs:
            del permissions["additionalDirectories"]
        if not permissions:
            del data["permissions"]


def _group(event: str, command: str) -> dict[str, Any]:
    hook = {
        "type": "command",
        "command": f"{command} hooks run {_RUN[event]}",
        "timeout": _TIMEOUT_S[event],
    }
    if event == "PostToolUse":
        return {"matcher": POST_TOOL_MATCHER, "hooks": [hook]}
    return {"hooks": [hook]}


def install(client: str, scope: Scope, project: Path, *, command: str | None = None) -> Change:
    """Add ctx's hooks to ``client``'s settings file for ``scope``; keep everything else.

    Raises:
        ConfigError: the file is not a JSON object, or the client has no such file.
        OSError: the file cannot be written.
    """
    path = settings_path(client, scope, project)
    raw, data = _load(path)
    have = _installed(data)
    wanted = EVENTS[client]
    missing = [e for e in wanted if e not in have]
    readable = client == "claude" and scope is Scope.GLOBAL and not _reads_offloads(data)
    if not missing and not readable:
        return Change(client, path, "unchanged", wanted)
    hooks = data.get("hooks")
    if hooks is None:
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise ConfigError(f'{path}: "hooks" is not an object; fix the file, then install again.')
    for event in missing:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ConfigError(f'{path}: "hooks.{event}" is not a list; fix the file.')
        groups.append(_group(event, command or default_command()))
    if readable:
        _let_read_offloads(path, data)
    written = _dump(data, raw)
    if not have:  # the file as the user had it, before any ctx hook
        _keep_original(path, raw, written)
    _write(path, written)
    return Change(client, path, "installed", wanted)


def uninstall(client: str, scope: Scope, project: Path) -> Change:
    """Take ctx's hooks out of ``client``'s settings file for ``scope``.

    The file ctx wrote, untouched since, gets its original bytes back (or is removed if
    ctx created it); a file edited since keeps the edits and loses only ctx's groups.

    Raises:
        ConfigError: the file is not a JSON object, or the client has no such file.
        OSError: the file cannot be written.
    """
    path = settings_path(client, scope, project)
    raw, data = _load(path)
    have = _installed(data)
    record = _original(path)
    if raw is not None and record is not None:
        if hashlib.sha256(raw).hexdigest() == record.get("written_sha256"):
            original = record.get("original")
            if original is None:
                path.unlink()
                action = "removed"
            else:
                _write(path, base64.b64decode(original))
                action = "restored"
            _record_path(path).unlink(missing_ok=True)
            return Change(client, path, action, have)
    if not have and not _reads_offloads(data):
        _record_path(path).unlink(missing_ok=True)
        return Change(client, path, "absent")
    hooks = data.get("hooks") or {}
    for event in have:
        kept = [g for g in hooks[event] if not _ours(g)]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        data.pop("hooks", None)
    _forget_offloads(data)
    _write(path, _dump(data, raw))
    _record_path(path).unlink(missing_ok=True)
    return Change(client, path, "cleaned", have)


def client_version(client: str) -> str | None:
    """``<client> --version`` of the client on PATH, or None when none answers."""
    exe = shutil.which(client)
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip() or done.stderr.strip()
    return out.splitlines()[0] if done.returncode == 0 and out else None


def status(project: Path) -> Status:
    """Every settings file ctx can install into, what of ctx's it holds, the clients' versions."""
    files: list[Installed] = []
    for client in CLIENTS:
        for scope in Scope:
            if client == "codex" and scope is Scope.LOCAL:
                continue
            path = settings_path(client, scope, project)
            try:
                _raw, data = _load(path)
            except ConfigError:
                data = {}  # unreadable: nothing of ctx's can be told apart in it
            files.append(Installed(client, scope, path, path.exists(), _installed(data)))
    return Status(tuple(files), {c: client_version(c) for c in CLIENTS})
