"""What a hook command runs: read the payload, answer, and never fail the client.

``ctx hooks run post-tool-use`` and ``ctx hooks run pre-compact`` reach :func:`main`
before the CLI (typer, every command) is imported: the hook runs on every tool call.
Whatever goes wrong (a payload that is not JSON, an offload directory that cannot be
written, an invalid configuration), the tool output goes through as it was, the exit
code is 0 and one line goes to ``<data>/hooks/hooks.log`` (0600) and to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["EVENTS", "answer", "log_path", "main"]

EVENTS = ("post-tool-use", "pre-compact")
"""The hook events ``ctx hooks run`` answers."""


def log_path() -> Path:
    """The hooks' log: one line per problem, in ctx's data directory."""
    from ctxcli.services.dirs import data_dir

    return data_dir() / "hooks" / "hooks.log"


def answer(event: str, raw: bytes) -> bytes:
    """The bytes to print for one hook call: a JSON answer, or nothing.

    Raises:
        Exception: anything; :func:`main` turns it into a logged line.
    """
    # Only what a pass-through needs is imported before the size is known: it runs on
    # every tool call (make bench: bench_hooks.py).
    # json, not orjson: importing orjson takes longer than parsing a payload.
    payload = json.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError("the hook payload is not a JSON object")
    if event == "pre-compact":
        from ctxcli.hooks.pre_compact import snapshot_before_compaction

        snapshot_before_compaction(payload)
        return b""
    if event != "post-tool-use":
        raise ValueError(f"unknown hook event {event!r}; expected one of {', '.join(EVENTS)}")
    if not _has_text(payload.get("tool_response")):
        return b""
    from pathlib import Path

    from ctxcli.hooks.post_tool_use import limits_for, offload_root, respond

    limits = limits_for(Path(str(payload.get("cwd") or ".")))
    reply = respond(payload, limits, offload_root(payload, limits))
    if reply is None:
        return b""
    return json.dumps(reply).encode()  # ASCII: a lone surrogate stays a valid escape


def _has_text(value: Any, floor: int = 256) -> bool:
    """Cheap first look: no text over 256 characters (the least ``max_chars``) at all."""
    if isinstance(value, str):
        return len(value) > floor
    return value is not None and len(json.dumps(value)) > floor


def main(
    event: str,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Answer one hook call from ``stdin`` on ``stdout``; always 0."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr
    try:
        out = answer(event, stdin.read())
    except Exception as exc:  # the one place: a hook never fails the tool call
        _log(event, f"{type(exc).__name__}: {exc}", stderr)
        return 0
    if out:
        try:
            stdout.write(out + b"\n")
            stdout.flush()
        except OSError as exc:
            _log(event, f"cannot answer: {exc}", stderr)
    return 0


def _log(event: str, problem: str, stderr: TextIO) -> None:
    first = problem.splitlines()[0] if problem else "error"
    outcome = "compaction goes on" if event == "pre-compact" else "output passed through"
    line = f"ctx hooks {event}: {first}; {outcome}"
    try:
        stderr.write(line + "\n")
    except (OSError, ValueError):
        pass
    try:
        from ctxcli.services.dirs import private_dir

        path = log_path()
        private_dir(path.parent)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {line}\n")
    except OSError:
        pass
