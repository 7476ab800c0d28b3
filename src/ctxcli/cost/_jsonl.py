"""A session file for its bill: its JSON records by line, and which client wrote them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

from ctxcli.formats.clients import ClientFile, client_format, read_client_file

SessionFormat = Literal["claude_code", "codex"]
Source = str | Path | ClientFile | Iterable[bytes | str]
"""A path, a file already read (:func:`~ctxcli.formats.clients.read_client_file`), or
the file's lines."""


@dataclass(frozen=True, slots=True)
class Lines:
    """The records of one file: (1-based line, object) pairs, and the lines skipped."""

    records: tuple[tuple[int, dict[str, Any]], ...]
    malformed: int
    name: str


def read_lines(source: Source) -> Lines:
    """Read the JSON objects of ``source``, one per line.

    Read by the one reader of the clients' files (:mod:`ctxcli.formats.clients`).

    A line that is not a JSON object is counted and skipped: a redacted or truncated
    line must not stop a bill from being read (cc_mclaude_c76e5be5 has one).
    """
    if isinstance(source, ClientFile):
        file = source
    elif isinstance(source, str | Path):
        file = read_client_file(Path(source).read_bytes(), str(source))
    else:
        units = (line.encode() if isinstance(line, str) else line for line in source)
        raw = b"".join(u if u.endswith(b"\n") else u + b"\n" for u in units)
        file = read_client_file(raw, "<lines>")
    return Lines(tuple(file.objects()), file.malformed, file.path)


def session_format(records: Iterable[tuple[int, dict[str, Any]]]) -> SessionFormat | None:
    """Name the client format: ``codex``, ``claude_code``, or None for neither.

    The formats' own sniffers decide, as for every reader of these files.
    """
    fmt = client_format([record for _, record in records])
    return cast(SessionFormat, fmt.name) if fmt is not None else None


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
