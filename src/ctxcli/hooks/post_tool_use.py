"""Claude Code's ``PostToolUse`` payload in, the replacement in the tool's own shape out.

Claude Code applies ``hookSpecificOutput.updatedToolOutput`` only when it has the tool's
native output shape (a plain string for ``Bash`` or ``Read`` is dropped silently,
anthropics/claude-code#86753; the object is applied, #68951). So a replacement starts
from the payload's own ``tool_response`` and swaps only the long text fields, each for
the preview ``truncate_tool_output`` leaves (head, the hint naming the offload file and
the read tool, tail), after writing the full text to the offload directory
(:class:`~ctxcli.store.live.LiveOffload`: 0700 folders, 0600 files, names by tool call id).

Shapes, as Claude Code 2.1.331 sends and applies them (checked with the real CLI, see
docs/hooks.md):

- ``Bash``: ``{stdout, stderr, interrupted, isImage, noOutputExpected, ...}``: ``stdout``
  and ``stderr`` each cut if long. An output Claude Code persisted itself
  (``persistedOutputPath``: the model gets Claude Code's own 2 KB preview and path) is
  left alone.
- ``Read``: ``{type: "text", file: {filePath, content, numLines, startLine, totalLines}}``:
  ``content`` cut to its head and the hint (Claude Code numbers the lines it shows, so a
  tail after the hint would carry wrong line numbers).
- ``Grep``: ``content`` (content mode) and ``filenames``; ``Glob``: ``filenames`` (a list:
  cut as the lines Claude Code shows); ``WebFetch``: ``result``.
- MCP tools (``mcp__<server>__<tool>``): a string, or content blocks whose text blocks are
  cut; answered as ``updatedMCPToolOutput``.

Anything else passes through: no answer at all. So does a short output, an output ctx
already cut, and a tool call that reads a file of the offload directory (cutting it
again would send the agent round the truncate -> read -> truncate loop).

Thresholds are the ``truncate_tool_output`` settings of the configuration found from the
session's working directory (``max_chars`` and per-tool ``max_chars``/``skip``), its
``language`` and ``offload_dir``. Locating the file needs no validator; the validated
values are cached by the file's path, size and mtime, so only the first call after a
change loads the configuration (pydantic and every stage: about 0.3 s).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ctxcli.core.hints import is_ctx_marked, truncation_preview
from ctxcli.core.protocols import call_key, safe_name, sha256
from ctxcli.services.dirs import cache_dir, data_dir, private_dir

__all__ = [
    "HOOKS",
    "READ_TOOL",
    "Limits",
    "limits_for",
    "offload_root",
    "respond",
]

HOOKS = "hooks"
"""The folder of ctx's data directory for the hooks (offloads by session, the log)."""
READ_TOOL = "Read"
"""The tool a Claude Code agent reads a cited file back with."""
DEFAULT_MAX_CHARS = 50_000
"""``truncate_tool_output``'s own default (used when no configuration file exists)."""

At = tuple[str | int, ...]
Cutter = Callable[[str, str, At, bool, bool], "str | None"]


@dataclass(frozen=True)
class Limits:
    """What the hook cuts, and where it writes, from the configuration.

    Attributes:
        max_chars: outputs longer than this many characters are cut.
        tools: per-tool ``max_chars`` (``None``: the default) or ``-1`` to skip the tool.
        language: the language of the hint.
        offload_dir: the configured offload directory, if any (relative to the session's
            working directory).
    """

    max_chars: int = DEFAULT_MAX_CHARS
    tools: dict[str, int | None] = field(default_factory=dict)
    language: str = "en"
    offload_dir: str | None = None

    def limit(self, tool: str) -> int | None:
        """The threshold for ``tool``, or None if the configuration skips it."""
        value = self.tools.get(tool, 0)
        if value == -1:
            return None
        return value or self.max_chars


def limits_for(cwd: Path) -> Limits:
    """The limits of the configuration found from ``cwd`` (defaults without one).

    Raises:
        ConfigError: the configuration file is invalid.
    """
    from ctxcli.pipeline.locate import find_config

    found = find_config(cwd)
    if found is None:
        return Limits()
    path, _table = found
    stat = path.stat()
    key = hashlib.sha256(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()
    cached = cache_dir() / HOOKS / f"limits-{key[:24]}.json"
    try:
        data = json.loads(cached.read_bytes())
        return Limits(**data)
    except (OSError, ValueError, TypeError):
        pass
    limits = _load_limits(path, cwd)
    try:
        private_dir(cached.parent)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(limits)), encoding="utf-8")
        os.replace(tmp, cached)
    except OSError:
        pass  # a cache that cannot be written costs time, nothing else
    return limits


def _load_limits(path: Path, cwd: Path) -> Limits:
    from ctxcli.pipeline.config import load_config
    from ctxcli.stages.truncate_tool_output import TruncateToolOutputOptions

    config = load_config(start=cwd)
    opts = next(
        (s.options for s in config.stages if isinstance(s.options, TruncateToolOutputOptions)),
        TruncateToolOutputOptions(),
    )
    assert isinstance(opts, TruncateToolOutputOptions)
    tools = {name: (-1 if o.skip else o.max_chars) for name, o in opts.tools.items()}
    return Limits(opts.max_chars, tools, config.settings.language, config.settings.offload_dir)


def offload_root(payload: dict[str, Any], limits: Limits) -> Path:
    """Where a session's offloaded outputs go: the configured directory, else ctx's own.

    Without ``offload_dir`` in the configuration: ``<data>/hooks/<session id>``, which
    outlives the session (the hints in the session file cite it).
    """
    cwd = Path(str(payload.get("cwd") or "."))
    if limits.offload_dir:
        return (cwd / Path(limits.offload_dir).expanduser()).resolve()
    session = str(payload.get("session_id") or "unknown-session")
    return data_dir() / HOOKS / safe_name(session)


def respond(payload: dict[str, Any], limits: Limits, root: Path) -> dict[str, Any] | None:
    """The hook's answer to one ``PostToolUse`` payload, or None to let the output through.

    Raises:
        OffloadError: a long output could not be written (the caller lets it through).
    """
    tool = str(payload.get("tool_name") or "")
    response = payload.get("tool_response")
    limit = limits.limit(tool)
    if limit is None or response is None or not _long_somewhere(response, limit):
        return None
    if any(str(root) in text for text in _strings(payload.get("tool_input"))):
        return None  # reading ctx's own file back: never cut it again
    call_id = str(payload.get("tool_use_id") or "call")
    store: Any = None

    def cut(text: str, suffix: str, at: At, tail: bool = True, lines: bool = False) -> str | None:
        nonlocal store
        if len(text) <= limit or is_ctx_marked(text):
            return None
        if store is None:
            from ctxcli.store.live import LiveOffload

            private_dir(root)
            store = LiveOffload(root)
        from ctxcli.store.hook_notes import Cut, exact_bytes, note_cut

        path = store.put("trunc", call_key(call_id) + suffix, text)
        short = truncation_preview(text, limit, path, READ_TOOL, limits.language, tail=tail)
        # The note lets ctx restore verify the file and put the original back.
        digests = (sha256(exact_bytes(text)), sha256(exact_bytes(short)))
        note_cut(store, Cut(call_id, tool, at, lines, path, *digests), text)
        return short

    if tool.startswith("mcp__"):
        mcp = _mcp(response, cut)
        return None if mcp is None else _answer("updatedMCPToolOutput", mcp)
    shape = _SHAPES.get(tool)
    new = shape(response, cut) if shape is not None and isinstance(response, dict) else None
    return None if new is None else _answer("updatedToolOutput", new)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _answer(key: str, value: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", key: value}}


def _is_lines(value: Any) -> TypeGuard[list[str]]:
    """A non-empty list of one-line strings: joined by line breaks, split back exactly."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and "\n" not in v for v in value)
    )


def _long_somewhere(value: Any, limit: int) -> bool:
    """True if ``value`` holds a string, or a list of strings, longer than ``limit``."""
    if isinstance(value, str):
        return len(value) > limit
    if isinstance(value, dict):
        return any(_long_somewhere(v, limit) for v in value.values())
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return sum(len(v) + 1 for v in value) > limit
        return any(_long_somewhere(v, limit) for v in value)
    return False


def _fields(response: dict[str, Any], cut: Cutter, names: tuple[str, ...]) -> dict[str, Any] | None:
    """``response`` with each named text (or list of lines) field cut; None if none was."""
    new = dict(response)
    for name in names:
        value = response.get(name)
        suffix = "" if name == names[0] else f"-{name}"
        if isinstance(value, str):
            short = cut(value, suffix, (name,), True, False)
            if short is not None:
                new[name] = short
        elif _is_lines(value):
            short = cut("\n".join(value), suffix, (name,), True, True)
            if short is not None:
                new[name] = short.split("\n")
    return new if new != response else None


def _bash(response: dict[str, Any], cut: Cutter) -> dict[str, Any] | None:
    if not isinstance(response.get("stdout"), str) or response.get("persistedOutputPath"):
        return None
    return _fields(response, cut, ("stdout", "stderr"))


def _read(response: dict[str, Any], cut: Cutter) -> dict[str, Any] | None:
    file = response.get("file")
    if response.get("type") != "text" or not isinstance(file, dict):
        return None
    content = file.get("content")
    if not isinstance(content, str):
        return None
    short = cut(content, "", ("file", "content"), False, False)
    if short is None:
        return None
    return {**response, "file": {**file, "content": short}}


def _grep(response: dict[str, Any], cut: Cutter) -> dict[str, Any] | None:
    return _fields(response, cut, ("content", "filenames"))


def _glob(response: dict[str, Any], cut: Cutter) -> dict[str, Any] | None:
    return _fields(response, cut, ("filenames",))


def _web_fetch(response: dict[str, Any], cut: Cutter) -> dict[str, Any] | None:
    return _fields(response, cut, ("result",))


_SHAPES: dict[str, Callable[[dict[str, Any], Cutter], dict[str, Any] | None]] = {
    "Bash": _bash,
    "Read": _read,
    "Grep": _grep,
    "Glob": _glob,
    "WebFetch": _web_fetch,
}


def _mcp(response: Any, cut: Cutter) -> Any:
    """An MCP tool's result with its long texts cut: a string, blocks, or ``{content: blocks}``."""
    if isinstance(response, str):
        return cut(response, "", (), True, False)
    if isinstance(response, dict) and isinstance(response.get("content"), list):
        blocks = _mcp_blocks(response["content"], cut, ("content",))
        return None if blocks is None else {**response, "content": blocks}
    if isinstance(response, list):
        return _mcp_blocks(response, cut, ())
    return None


def _mcp_blocks(blocks: list[Any], cut: Cutter, at: At) -> list[Any] | None:
    new = list(blocks)
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            where = (*at, i, "text")
            suffix = "" if i == 0 else f"-{i}"
            short = cut(text, suffix, where, True, False) if isinstance(text, str) else None
            if short is not None:
                new[i] = {**block, "text": short}
    return new if new != blocks else None
