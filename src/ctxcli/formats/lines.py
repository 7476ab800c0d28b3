"""JSONL lines: records with their original bytes, parsed one by one, and written back.

A record keeps the bytes it was read from (a view into the file's buffer, no copy) so
an unchanged record is copied to the output byte for byte; parsing names the line of
every record that is not JSON, and an output made of many records' bytes gives a
mapped input's pages back as it is joined (:func:`join_parts`).
"""

from __future__ import annotations

import io
import mmap
import re
from collections.abc import Iterator, Sequence
from enum import Enum
from typing import Any, Protocol, overload

from ctxcli.core.errors import OnInvalid, Remedy, TranscriptError
from ctxcli.core.io import RELEASE_BYTES, Input, Pages, release
from ctxcli.core.model import Message
from ctxcli.formats.jsontext import loads_record

__all__ = [
    "BOM",
    "Datas",
    "Record",
    "Writable",
    "iter_records",
    "join_parts",
    "parse_line",
    "parse_lines",
    "raise_first_invalid",
]

BOM = b"\xef\xbb\xbf"


class _Again(Enum):
    """What a thin record holds in place of its data (an enum: it pickles as itself)."""

    PARSE = 0


class Record:
    """One record of the file: its original bytes and, if it parsed, its data."""

    __slots__ = ("_raw", "_start", "_end", "line", "_data", "_pages", "message", "invalid", "kept")

    line: int
    message: Message | None
    invalid: str | None
    kept: bool
    """A record of an incremental re-run's kept prefix: no bytes, ``data`` is at most
    the format's :meth:`Format.skeleton` of it and ``message`` a text-less stand-in."""

    def __init__(
        self,
        raw: bytes | memoryview,
        line: int,
        data: Any = None,
        message: Message | None = None,
        invalid: str | None = None,
        kept: bool = False,
    ) -> None:
        self._raw, self._start, self._end = raw, -1, -1
        self._pages: Pages | None = None
        self._data: Any
        self.line, self._data, self.message, self.invalid, self.kept = (
            line,
            data,
            message,
            invalid,
            kept,
        )

    @classmethod
    def in_view(cls, view: memoryview, start: int, end: int, line: int) -> Record:
        """The record at ``view[start:end]``, holding the file's view, not one of its own.

        A memoryview object is 184 bytes: one per line was 95 MB of a 1 GB session.
        """
        rec = cls(view, line)
        rec._start, rec._end = start, end
        return rec

    @property
    def data(self) -> Any:
        """The record's parsed JSON (None for a blank line or one that is not JSON).

        A thin record (:meth:`thin`) parses its bytes again on each read: read it
        once per use, and never change it in place (set :attr:`data` instead).
        """
        data = self._data
        if data is _Again.PARSE:
            # JSON allows the line end around a value; a line with a BOM is never thin.
            data = loads_record(self._raw[self._start : self._end])
            if self._pages is not None:
                self._pages.read(self._end - self._start)  # the pages go back, as the parse's did
        return data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = value

    @property
    def has_data(self) -> bool:
        """True for a record that parsed (not blank, not invalid), without parsing it again."""
        return self._data is not None

    @property
    def is_thin(self) -> bool:
        """True while the record's data is read again from its bytes (:meth:`thin`)."""
        return self._data is _Again.PARSE

    def thin(self, pages: Pages) -> None:
        """Let the parsed data go: :attr:`data` reads the bytes again when asked.

        For a record the model never sees in a large file: a gigabyte Claude Code
        session holds half a million progress records, each parsed one a dict of a
        kilobyte that hardly any stage reads. ``pages`` gives a mapped input's pages
        back as they are read again.
        """
        if self._data is None or self._start < 0 or self.has_bom:
            return
        self._data = _Again.PARSE
        self._pages = pages if pages.raw is not None else None  # bytes: nothing to give back

    @property
    def raw(self) -> bytes | memoryview:
        """Return the record's original bytes.

        The original bytes. For JSONL a zero-copy view into the file's buffer: holding
        a second copy of every line doubled the peak memory on large transcripts.
        """
        if self._start < 0:
            return self._raw
        return self._raw[self._start : self._end]

    def source(self) -> tuple[bytes | memoryview, int]:
        """The buffer :attr:`raw` is a part of, and where in it it starts."""
        return self._raw, max(self._start, 0)

    def __repr__(self) -> str:
        return f"Record(line={self.line}, {len(self.raw)} bytes, data={self.data!r:.60})"

    @property
    def has_bom(self) -> bool:
        """True if the record starts with a UTF-8 byte-order mark."""
        return bytes(self.raw[:3]) == BOM

    @property
    def body(self) -> bytes:
        """The raw bytes without BOM and line terminator (a copy)."""
        raw = bytes(self.raw[3:] if self.has_bom else self.raw)
        return raw.rstrip(b"\r\n")

    @property
    def terminator(self) -> bytes:
        r"""The record's line terminator (``\n``, ``\r\n`` or nothing)."""
        tail = bytes(self.raw[-2:])
        if tail == b"\r\n":
            return b"\r\n"
        return b"\n" if tail.endswith(b"\n") else b""


class Datas(Sequence[Any]):
    """The records' parsed data as a sequence, each read when asked (thin ones parse again)."""

    __slots__ = ("_records",)

    def __init__(self, records: Sequence[Record]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [rec.data for rec in self._records[index]]
        return self._records[index].data


class Writable(Protocol):
    """Where an output is written as it is made (a file open for writing)."""

    def write(self, data: bytes | memoryview, /) -> int:
        """Write ``data``; return how many bytes were written."""


def join_parts(parts: list[bytes | memoryview], into: Writable | None = None) -> bytes:
    """``b"".join(parts)``, giving a mapped input's pages back as its records are copied.

    Reading a record of a map faults its neighbours in too (the kernel maps up to 64 KB
    around a fault): copying a few MB of records scattered over the input would make
    all of it resident again. ``parts`` is emptied as it is copied (the output is not
    held twice). With ``into``, the parts are written there instead and ``b""`` is
    returned: the output is never held whole.
    """
    maps = {
        id(p.obj): p.obj
        for p in parts
        if isinstance(p, memoryview) and isinstance(p.obj, mmap.mmap)
    }
    if not maps and into is None:
        return b"".join(parts)
    buffer = io.BytesIO()
    out: Writable = into if into is not None else buffer
    copied = 0
    for i in range(len(parts)):
        copied += len(parts[i])
        out.write(parts[i])
        parts[i] = b""
        # Every 128 parts (small records each fault in their 64 KB) or 4 MB (large
        # parts: a collection's runs).
        if maps and (i % 128 == 127 or copied >= RELEASE_BYTES):
            copied = 0
            for m in maps.values():
                release(m)
    for m in maps.values():
        release(m)
    return b"" if into is not None else buffer.getvalue()


def parse_lines(raw: Input, path: str, *, on_invalid: OnInvalid) -> list[Record]:
    """Split JSONL bytes into records, parsing each line.

    Blank lines are kept as records without data. A line that is not JSON is an
    error naming the line, or (``on_invalid="keep"``) a record passed through as is.
    """
    keep = OnInvalid.of(on_invalid) is OnInvalid.KEEP
    records = list(iter_records(raw, path))
    if not keep:
        raise_first_invalid(records, path)
    return records


def raise_first_invalid(records: Sequence[Record], path: str) -> None:
    """Raise the error naming the first record that is not JSON, if there is one."""
    for rec in records:
        if rec.invalid is not None:
            raise TranscriptError(path, rec.line, rec.invalid, remedy=Remedy.KEEP_INVALID)


def iter_records(raw: Input, path: str) -> Iterator[Record]:
    """Yield the records of ``raw`` one by one, parsed, invalid ones included.

    The records of ``raw`` one by one, parsed (see :func:`parse_lines`), invalid
    ones included; a mapped input's pages are given back as they are parsed.

    Raises:
        TranscriptError: ``raw`` holds nothing but blanks.
    """
    if not raw or _NON_SPACE.search(raw) is None:  # strip() would copy the input to find out
        raise TranscriptError(path, None, "the transcript is empty; there is nothing to reduce")
    pages = Pages(raw)
    view = memoryview(raw)
    for i, (start, end) in enumerate(_line_ends(raw)):
        pages.reached(end)  # a mapped input's parsed pages go back
        rec = Record.in_view(view, start, end, i + 1)
        unit = view[start:end]
        body = _body_view(unit)  # no copy: orjson parses the view
        if _blank(body):
            yield rec
            continue
        try:
            rec.data = loads_record(body)
        except (ValueError, RecursionError) as exc:
            reason = _json_reason(exc)
            if not rec.terminator and i > 0:
                reason = "incomplete last line; was the file still being written?"
            rec.invalid = f"not valid JSON ({reason})"
        yield rec
    release(raw)


_LINE_END = (0x0A, 0x0D)
_SPACE = frozenset(b" \t\n\r\x0b\x0c")
_NON_SPACE = re.compile(rb"[^ \t\n\r\x0b\x0c]")


def parse_line(unit: bytes | memoryview) -> Any:
    """The value of one line (with its terminator) as :func:`iter_records` parses it.

    Raises:
        ValueError: the line is not JSON.
    """
    return loads_record(_body_view(memoryview(unit)))


def _body_view(unit: memoryview) -> memoryview:
    """``Record.body`` as a view: without BOM and trailing CR/LF, and no copy."""
    start = 3 if unit[:3] == BOM else 0
    end = len(unit)
    while end > start and unit[end - 1] in _LINE_END:
        end -= 1
    return unit[start:end]


def _blank(body: memoryview) -> bool:
    """True for a body of ASCII whitespace only (what ``bytes.strip`` removes)."""
    if not body or body[0] not in _SPACE:
        return not body
    return not bytes(body).strip()


def _line_ends(data: Input) -> Iterator[tuple[int, int]]:
    """Where the lines of ``data`` start and end, each with its terminator."""
    start, end_of_data = 0, len(data)
    while start < end_of_data:
        end = data.find(b"\n", start)
        end = end_of_data if end < 0 else end + 1
        yield start, end
        start = end


def _json_reason(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError) or "utf-8" in str(exc).lower():
        return "invalid UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = str(exc).split(":")[0].strip()
    return text[:80] or type(exc).__name__
