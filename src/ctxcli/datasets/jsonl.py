"""Dataset files of JSONL rows, carried as their text: reduced in place, restored byte for byte.

Arrow's JSON reader infers one struct type per column and gives every message the
fields of every other (``"tool_calls": null``, ``"name": null``...): a row read that way
is never written back as it was. Here every line stays text. The trajectory in a row's
column, the JSON text of its value, is reduced as a transcript of its own (a list of
messages is a JSON document, a string holds a transcript's text); the reduced text
takes its place in the line, and ctx's columns are appended as the object's last
members::

    {"id": 7, "messages": [...reduced...], "ctx_format": "json_doc", ..., "ctx_error": null}

Restoring takes those members off again, rebuilds the value's original text from the
blobs and puts it back: the line's bytes, checked against their SHA-256. A line that is
no JSON object is left as it was and counted as an error; an object without the column
gets the columns with its error in ``ctx_error``; a row that has ctx's columns already
is refused (restore the dataset first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxcli.core.errors import CtxError, RestoreError
from ctxcli.core.protocols import encode_text, sha256, split_units
from ctxcli.datasets.rows import STAT_COLUMNS, ReducedRow, RowReducer, fetch_blob, restore_row
from ctxcli.formats.jsontext import loads_record, member_span
from ctxcli.formats.lines import BOM

__all__ = ["FileTotals", "ReducedFile", "reduce_jsonl", "restore_jsonl"]

LINE_RESTORE_VERSION = 1
_DIGEST = re.compile(r"[0-9a-f]{64}")
_ENCODINGS = ("json", "orjson", "ascii")
_KEPT = re.compile(r"([0-9]{1,12}):([0-9a-f]{64})")
"""The encoding of a string kept as a blob: its length and SHA-256."""
_JSON_WS = " \t\r\n"


@dataclass
class FileTotals:
    """What the rows of one file (or of many, added up) came to."""

    rows: int = 0
    errors: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    def add(self, other: FileTotals) -> None:
        """Add ``other``'s counts to these."""
        for name, value in other.__dict__.items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class ReducedFile:
    """A reduced JSONL file: its bytes, the blobs its rows need and its totals."""

    data: bytes
    blobs: dict[str, bytes] = field(repr=False)
    totals: FileTotals


@dataclass(frozen=True)
class _Line:
    """One line of a file: a BOM (first line only), its text, its terminator."""

    lead: bytes
    body: bytes
    end: bytes

    def join(self, body: bytes) -> bytes:
        return self.lead + body + self.end


def _lines(raw: bytes) -> Iterator[_Line]:
    for i, unit in enumerate(split_units(raw)):
        lead = BOM if i == 0 and unit.startswith(BOM) else b""
        end = b"\r\n" if unit.endswith(b"\r\n") else b"\n" if unit.endswith(b"\n") else b""
        yield _Line(lead, unit[len(lead) : len(unit) - len(end)], end)


def _dump(value: Any) -> str:
    """``value`` as JSON text, the same text for the same value every time."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate: Python's json escapes it
        return json.dumps(value)


def _ctx_members(values: Mapping[str, Any]) -> str:
    """Return ctx's columns as the members appended to a row's object."""
    return "".join(f',"{name}":{_dump(values.get(name))}' for name in STAT_COLUMNS)


def _with_members(text: str, members: str) -> str:
    """``text`` (one JSON object with members) with ``members`` added last."""
    body = text.rstrip(_JSON_WS)
    return f"{body[:-1]}{members}}}{text[len(body) :]}"


def reduce_jsonl(raw: bytes, reducer: RowReducer, column: str, *, name: str) -> ReducedFile:
    """Reduce the ``column`` of every row of a JSONL file; other bytes stay as they are."""
    out: list[bytes] = []
    blobs: dict[str, bytes] = {}
    totals = FileTotals()
    for number, line in enumerate(_lines(raw), start=1):
        if not line.body.strip():
            out.append(line.join(line.body))
            continue
        totals.rows += 1
        text, row = _row_text(line.body)
        if text is None or not isinstance(row, dict) or not row:
            totals.errors += 1  # not a row ctx can add columns to: left as it was
            out.append(line.join(line.body))
            continue
        if not row.keys().isdisjoint(STAT_COLUMNS):
            # Its columns lead back to an original through another offload: a second
            # set would be a duplicate key, and dropping them would lose that way back.
            raise CtxError(
                f"{name}:{number}: the row has ctx's columns already; restore the dataset "
                "before reducing it again."
            )
        values, new_text = _reduce_row(text, reducer, column, blobs, f"{name}:{number}")
        if values["ctx_error"] is not None:
            totals.errors += 1
        else:
            _count(totals, values)
        out.append(line.join(_with_members(new_text, _ctx_members(values)).encode()))
    return ReducedFile(b"".join(out), blobs, totals)


def _row_text(body: bytes) -> tuple[str | None, Any]:
    """A line's text and what it parses to, or None for a line that is no JSON."""
    try:
        return body.decode("utf-8"), loads_record(body)
    except ValueError:  # not UTF-8, not JSON
        return None, None


def _count(totals: FileTotals, values: Mapping[str, Any]) -> None:
    for key in ("tokens_before", "tokens_after", "bytes_before", "bytes_after"):
        setattr(totals, key, getattr(totals, key) + values[f"ctx_{key}"])


def _reduce_row(
    text: str, reducer: RowReducer, column: str, blobs: dict[str, bytes], name: str
) -> tuple[dict[str, Any], str]:
    """Return ctx's columns for one row and the row's text with its column reduced."""
    values: dict[str, Any] = dict.fromkeys(STAT_COLUMNS)
    span = member_span(text, column)
    if span is None:
        values["ctx_error"] = f"{name}: the row has no column {column!r}"
        return values, text
    start, end = span
    try:
        cell, encoding, reduced = _reduce_cell(text[start:end], reducer, blobs, name)
    except CtxError as exc:
        values["ctx_error"] = str(exc)
        return values, text
    blobs.update(reduced.blobs)
    restore = {
        "v": LINE_RESTORE_VERSION,
        "cell": orjson.loads(reduced.restore),
        "encoding": encoding,
        "input": sha256(encode_text(text)),
    }
    values.update({f"ctx_{k}": reduced.stats[k] for k in _STATS})
    values["ctx_restore"] = _dump(restore)
    return values, text[:start] + cell + text[end:]


_STATS = ("format", "tokens_before", "tokens_after", "bytes_before", "bytes_after")


def _reduce_cell(
    cell: str, reducer: RowReducer, blobs: dict[str, bytes], name: str
) -> tuple[str, str, ReducedRow]:
    """The reduced text of a column's value, how to write its original back, the row.

    A list or an object is reduced as the JSON document it is ("json"). A string holds
    a transcript's text: that is reduced, and its original escaping is noted
    ("orjson" or "ascii", the two ways JSON writers escape), or, when neither writes
    exactly these bytes, the original text is kept as a blob and named by its hash.
    """
    if not cell.startswith('"'):
        reduced = reducer(cell, name=name)
        if "\n" in reduced.value:  # a document's style has no line breaks on one line
            raise CtxError(f"{name}: the reduced value would span lines")
        return reduced.value, "json", reduced
    value = loads_record(cell.encode("utf-8"))
    reduced = reducer(value, name=name)
    encoding = next((e for e in ("orjson", "ascii") if _escaped(value, e) == cell), None)
    if encoding is None:
        data = cell.encode("utf-8")
        blobs[sha256(data)] = data
        encoding = f"{len(data)}:{sha256(data)}"
    return json.dumps(reduced.value), encoding, reduced


def _escaped(value: str, encoding: str) -> str | None:
    """``value`` as a JSON string, escaped the way ``encoding`` names."""
    if encoding == "ascii":
        return json.dumps(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate: orjson writes none
        return None


def restore_jsonl(
    raw: bytes,
    blobs: Mapping[str, bytes] | Callable[[str], bytes],
    column: str,
    *,
    name: str,
) -> tuple[bytes, int]:
    """The original bytes of a file :func:`reduce_jsonl` wrote, and its rows restored.

    Raises:
        RestoreError: a row's ctx columns or its restore value are not what ctx wrote,
            or a blob is missing or altered.
    """
    out: list[bytes] = []
    restored = 0
    for number, line in enumerate(_lines(raw), start=1):
        text, row = _row_text(line.body) if line.body.strip() else (None, None)
        if text is None or not isinstance(row, dict) or "ctx_restore" not in row:
            out.append(line.join(line.body))
            continue
        original = _restore_row(text, row, blobs, column, f"{name}:{number}")
        out.append(line.join(encode_text(original)))
        restored += row["ctx_restore"] is not None
    return b"".join(out), restored


def _restore_row(
    text: str,
    row: dict[str, Any],
    blobs: Mapping[str, bytes] | Callable[[str], bytes],
    column: str,
    name: str,
) -> str:
    """One row's original text from its reduced text."""
    members = _ctx_members(row)
    body = text.rstrip(_JSON_WS)
    if not body.endswith(members + "}"):
        raise RestoreError(f"{name}: the ctx columns are not the last members of the row.")
    reduced = body[: -len(members) - 1] + "}" + text[len(body) :]
    if row["ctx_restore"] is None:
        return reduced  # a row ctx could not reduce: only the columns were added
    info = _line_restore(row["ctx_restore"], name)
    span = member_span(reduced, column)
    if span is None:
        raise RestoreError(f"{name}: the row has no column {column!r}.")
    start, end = span
    cell = _original_cell(reduced[start:end], info, blobs, name)
    original = reduced[:start] + cell + reduced[end:]
    if sha256(encode_text(original)) != info["input"]:
        raise RestoreError(f"{name}: the rebuilt row does not match the original's sha256.")
    return original


def _line_restore(value: Any, name: str) -> dict[str, Any]:
    """A row's ctx_restore, checked (the cell's own restore value is checked later)."""
    try:
        info = orjson.loads(value)
    except (orjson.JSONDecodeError, TypeError):
        info = None
    ok = (
        isinstance(info, dict)
        and info.get("v") == LINE_RESTORE_VERSION
        and isinstance(info.get("cell"), dict)
        and isinstance(info.get("input"), str)
        and _DIGEST.fullmatch(info["input"]) is not None
        and isinstance(info.get("encoding"), str)
        and (info["encoding"] in _ENCODINGS or _KEPT.fullmatch(info["encoding"]) is not None)
    )
    if not ok:
        raise RestoreError(
            f"{name}: the ctx_restore value is not one ctx wrote; it cannot be used."
        )
    assert isinstance(info, dict)
    return info


def _original_cell(
    cell: str,
    info: Mapping[str, Any],
    blobs: Mapping[str, bytes] | Callable[[str], bytes],
    name: str,
) -> str:
    """The text of a column's original value, from its reduced text."""
    encoding = info["encoding"]
    kept = _KEPT.fullmatch(encoding)
    try:
        if kept is not None:
            return fetch_blob(blobs, kept[2], int(kept[1]), name=name).decode("utf-8")
        parsed = cell if encoding == "json" else loads_record(cell.encode("utf-8"))
    except ValueError:
        raise RestoreError(f"{name}: the row's {encoding} value is not what ctx wrote.") from None
    value = restore_row(parsed, _dump(info["cell"]), blobs, name=name)
    escaped = value if encoding == "json" else None
    if isinstance(value, str) and encoding != "json":
        escaped = _escaped(value, encoding)
    if not isinstance(escaped, str):
        raise RestoreError(f"{name}: the restored value cannot be written as it was.")
    return escaped
