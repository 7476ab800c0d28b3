"""Reading a session file for its bill: JSON records by line, and which client wrote them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import orjson

SessionFormat = Literal["claude_code", "codex"]
Source = str | Path | Iterable[bytes | str]

# Record types of a Codex rollout's envelope ({"timestamp", "type", "payload"}).
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}


@dataclass(frozen=True, slots=True)
class Lines:
    """The records of one file: (1-based line, object) pairs, and the lines skipped."""

    records: tuple[tuple[int, dict[str, Any]], ...]
    malformed: int
    name: str


def read_lines(source: Source) -> Lines:
    """Parse ``source`` (a path or an iterable of lines) one JSON object per line.

    A line that is not a JSON object is counted and skipped: a redacted or truncated
    line must not stop a bill from being read (cc_mclaude_c76e5be5 has one).
    """
    if isinstance(source, str | Path):
        with open(source, "rb") as fh:
            return _parse(fh, str(source))
    return _parse(source, "<lines>")


def _parse(lines: Iterable[bytes | str], name: str) -> Lines:
    records: list[tuple[int, dict[str, Any]]] = []
    malformed = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            malformed += 1
            continue
        if isinstance(value, dict):
            records.append((number, value))
        else:
            malformed += 1
    return Lines(tuple(records), malformed, name)


def session_format(records: Iterable[tuple[int, dict[str, Any]]]) -> SessionFormat | None:
    """``codex`` for a rollout, ``claude_code`` for a session file, None for neither."""
    for _, record in records:
        kind = record.get("type")
        if kind in CODEX_TYPES and isinstance(record.get("payload"), dict):
            return "codex"
        if kind in ("user", "assistant") and isinstance(record.get("message"), dict):
            return "claude_code"
    return None


def seconds(stamp: Any) -> float | None:
    """An ISO-8601 timestamp as seconds since the epoch, or None when absent or invalid."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def count(value: Any) -> int:
    """A token count from a usage record: a non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def iter_dicts(value: Any) -> Iterator[dict[str, Any]]:
    """The objects of a JSON list (anything else yields nothing)."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                yield item
