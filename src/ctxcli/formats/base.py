"""The format interface and the machinery every JSONL format shares.

A format turns parsed records into :class:`~ctxcli.core.model.Message`s (``to_message``)
and writes an edited message back into a copy of its record (``apply``). Loading,
line numbers, raw-byte pass-through, re-serialisation in the file's own JSON style
and the restore script are done here once, for all formats.
"""

from __future__ import annotations

import io
import itertools
import json
import mmap
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import orjson

from ctxcli.core.errors import ConfigError, PrefixChanged, Remedy, TranscriptError
from ctxcli.core.io import RELEASE_BYTES, Input, Pages, release
from ctxcli.core.model import (
    Block,
    Conversation,
    Kind,
    LazyBlock,
    LazyText,
    Message,
    SourceRecord,
    TextSpan,
    hydrate,
)
from ctxcli.core.plugins import Registry
from ctxcli.core.protocols import OriginalsSink, RestoreScript

if TYPE_CHECKING:
    pass

from ctxcli.formats.jsontext import Style, dumps_keeping, dumps_plain, numbers_may_change

BOM = b"\xef\xbb\xbf"
Path_ = tuple[str | int, ...]


class Record:
    """One record of the file: its original bytes and, if it parsed, its data."""

    __slots__ = ("_raw", "_start", "_end", "line", "data", "message", "invalid", "kept")

    line: int
    data: Any
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
        self.line, self.data, self.message, self.invalid, self.kept = (
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
    def raw(self) -> bytes | memoryview:
        """The original bytes. For JSONL a zero-copy view into the file's buffer: holding
        a second copy of every line doubled the peak memory on large transcripts."""
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
        """The record's line terminator (``\\n``, ``\\r\\n`` or nothing)."""
        tail = bytes(self.raw[-2:])
        if tail == b"\r\n":
            return b"\r\n"
        return b"\n" if tail.endswith(b"\n") else b""


@dataclass
class Document:
    """A loaded transcript: the records and the conversation the stages see."""

    path: str
    format: Format
    raw: Input
    records: list[Record]
    conversation: Conversation
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def line_of(self, message: Message) -> int | None:
        """The line number a message was loaded from."""
        if message.key is None:
            return None
        return self.records[message.key].line


class State(Enum):
    """What happens to one unit of the output."""

    COPY = "copy"
    CHANGED = "changed"
    NEW = "new"
    DROPPED = "dropped"


@dataclass(slots=True)
class OutRecord:
    """One record in the output plan; ``fixup`` hooks may edit ``data``."""

    state: State
    orig: Record | None
    data: Any
    message: Message | None = None

    def touch(self) -> Any:
        """Mark a copied record as changed and return its data for editing."""
        if self.state is State.COPY:
            self.state = State.CHANGED
        return self.data


@dataclass(frozen=True, order=True)
class Problem:
    """One pairing problem, with the line it is on."""

    line: int | None
    kind: str
    call_id: str | None
    message: str

    def render(self, path: str) -> str:
        """``path:line: message``."""
        where = f"{path}:{self.line}" if self.line is not None else path
        return f"{where}: {self.message}"


class Writable(Protocol):
    """Where an output is written as it is made (a file open for writing)."""

    def write(self, data: bytes | memoryview, /) -> int: ...


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


# --- copy-on-write access to nested JSON -----------------------------------------


def get_in(data: Any, path: Path_) -> Any:
    """The value at ``path`` (keys and indices)."""
    for step in path:
        data = data[step]
    return data


def set_in(data: Any, path: Path_, value: Any) -> Any:
    """Return a copy of ``data`` with ``value`` at ``path``; only the path is copied."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy: Any = list(data) if isinstance(data, list) else dict(data)
    copy[head] = set_in(data[head], rest, value)
    return copy


# --- lazy texts ---------------------------------------------------------------------

LAZY_MIN_CHARS = 1024
"""A text at least this long is left in the input by a format with ``lazy_texts``."""


class Span(LazyText):
    """Where a text's JSON string sits in its record's bytes (a ``core.model.TextSpan``).

    Decoding it again is a parse of that string (orjson, from the map: gigabytes a
    second); holding it costs a few dozen bytes instead of the text. The record's
    parsed data holds the span in the text's place too (:func:`hydrate`).
    """

    __slots__ = ("view", "start", "end", "chars", "pages")

    def __init__(self, view: memoryview, start: int, end: int, chars: int, pages: Pages) -> None:
        self.view, self.start, self.end, self.chars, self.pages = view, start, end, chars, pages

    def text(self) -> str:
        text: str = loads_record(self.view[self.start : self.end])
        self.pages.read(self.end - self.start)  # the pages read go back, as the parse's did
        return text

    def __repr__(self) -> str:
        return f"Span({self.start}, {self.end})"


def _same_text(before: Block, after: Block) -> bool:
    """Whether two blocks hold the same text, reading a lazy one only when needed."""
    if before is after:
        return True
    if isinstance(before, LazyBlock) and len(after.text) != before.span.chars:
        return False
    return before.text == after.text


def _leave_in_input(
    fmt: Format, rec: Record, message: Message | None, pages: Pages
) -> Message | None:
    """Leave ``rec``'s long texts in the input: its message's string-field block texts,
    and every long string under the fields :meth:`Format.lazy_fields` names."""
    finder = _Finder(rec, pages)
    if message is not None:
        message = _lazy_blocks(fmt, rec, message, finder)
    data = rec.data
    if isinstance(data, dict):
        for key in fmt.lazy_fields(data):
            value = data.get(key)
            if isinstance(value, (dict, list)):
                _lazy_strings(value, finder)
    return message


class _Finder:
    """Finds a text's JSON literal in one record's bytes, and makes its :class:`Span`."""

    __slots__ = ("rec", "pages", "body", "view", "offset")

    def __init__(self, rec: Record, pages: Pages) -> None:
        self.rec, self.pages = rec, pages
        self.body: bytes | None = None
        self.view: memoryview | None = None  # the file's, not the record's
        self.offset = 0

    def span(self, text: str) -> Span | None:
        try:
            literal = orjson.dumps(text)
        except orjson.JSONEncodeError:  # a lone surrogate: not orjson's text
            return None
        if self.body is None:
            self.body = bytes(self.rec.raw)
            buffer, self.offset = self.rec.source()
            self.view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        at = self.body.find(literal)
        if at < 0:  # escaped some other way (ensure_ascii): stays a str
            return None
        assert self.view is not None
        # Any occurrence will do: the literal decodes to ``text`` wherever it is.
        at += self.offset
        return Span(self.view, at, at + len(literal), len(text), self.pages)


def _lazy_blocks(fmt: Format, rec: Record, message: Message, finder: _Finder) -> Message:
    """``message`` with its long string-field texts left in the record's bytes."""
    blocks: list[Block] | None = None
    for i, block in enumerate(message.blocks):
        text = block.text
        if len(text) < LAZY_MIN_CHARS:
            continue
        path = fmt.text_path(block)
        span: TextSpan | None
        if not path:
            span = fmt.text_source(block, rec.data)  # a text made from the record
        elif get_in(rec.data, path) is not text:
            continue
        else:
            span = finder.span(text)
            if span is not None:
                get_in(rec.data, path[:-1])[path[-1]] = span  # the parsed record is ours
        if span is None:
            continue
        blocks = list(message.blocks) if blocks is None else blocks
        blocks[i] = LazyBlock(
            block.kind, span, block.call_id, block.name, block.is_error, block.slot
        )
    return message if blocks is None else message.with_blocks(blocks)


def _lazy_strings(value: dict[str, Any] | list[Any], finder: _Finder) -> None:
    """Put a :class:`Span` in place of every long string inside ``value`` (ours to edit)."""
    items: Any = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        if type(v) is str:
            if len(v) >= LAZY_MIN_CHARS:
                span = finder.span(v)
                if span is not None:
                    value[k] = span  # a value replaced, no key added
        elif isinstance(v, (dict, list)):
            _lazy_strings(v, finder)


SHARED_MAX_CHARS = 64
"""Strings shorter than this are shared by :func:`share_strings`."""


def share_strings(data: dict[str, Any], seen: dict[str, str], unique: Container[str]) -> None:
    """Make each short string of ``data`` the equal one ``seen`` holds (adding it if new).

    orjson makes a new object of every string it parses: a Claude Code session repeats
    its session id, working directory, version and branch on each of its 10^5 lines,
    a third of what its parsed records hold. Strings are immutable, so nothing can
    tell the shared one from a copy. Only ``data``'s own values and those of the
    objects it holds directly are shared (the fields records repeat), except the
    top-level fields named in ``unique``.
    """
    for k, v in data.items():
        t = type(v)
        if t is str:
            if len(v) < SHARED_MAX_CHARS and k not in unique:
                data[k] = seen.setdefault(v, v)  # a value replaced, no key added
        elif t is dict:
            for k2, v2 in v.items():
                if type(v2) is str and len(v2) < SHARED_MAX_CHARS:
                    v[k2] = seen.setdefault(v2, v2)


def delete_many(data: Any, container: Path_, indices: Sequence[int]) -> Any:
    """Return a copy of ``data`` without the listed indices of the list at ``container``."""
    items = get_in(data, container)
    drop = set(indices)
    return set_in(data, container, [x for i, x in enumerate(items) if i not in drop])


# --- JSON style ---------------------------------------------------------------------

_SPACED = re.compile(rb'^\s*[\[{]\s*"(?:[^"\\]|\\.)*"\s*:\s')


_ABSENT: Any = object()


def style_of(raw: bytes) -> Style:
    """The JSON style of ``raw``: compact or ``", "``/``": "``, ASCII-escaped or UTF-8."""
    spaced = _SPACED.match(raw) is not None
    ascii_only = raw.isascii() and b"\\u" in raw
    return Style(", " if spaced else ",", ": " if spaced else ":", ascii_only)


def dumps_like(data: Any, raw: bytes, original: Any = _ABSENT) -> bytes:
    """Serialise ``data`` in the style of ``raw``: compact or ``", "``/``": "``, ASCII or UTF-8.

    Changed records then look like their neighbours (tau-bench lines are written by
    Python's json with spaces; Claude Code's are compact). With ``original`` (what
    ``raw`` parses to), every value the change left alone keeps its exact text from
    ``raw`` (:func:`~ctxcli.formats.jsontext.dumps_keeping`): a number is never
    rewritten by a parse and a re-serialisation.

    Raises:
        ValueError: a changed value holds a number JSON cannot carry (never written
            as the non-JSON ``Infinity``).
    """
    style = style_of(raw)
    # Asked in this order, most records (no float, no -0) never serialise ``original``:
    # orjson caches the UTF-8 of every non-ASCII str it writes inside the str, and the
    # input's texts live until the end of the run (9 MB of a 100 MB input's peak).
    if original is not _ABSENT and numbers_may_change(original, raw):
        original = hydrate(original)  # no Span is a number: read back only when needed
    else:
        original = _ABSENT
    if original is not _ABSENT and not (
        style.comma == "," and not style.ascii and _orjson_wrote(original, raw)
    ):
        # ``raw`` is not orjson's text of ``original`` (when it is, orjson's output is
        # the concatenation of its parts' outputs: every value the change left alone
        # already has orjson's text, and serialising ``data`` whole gives what splicing
        # would; the splice was a third of a large reduce's dump).
        text = raw.decode("utf-8", "surrogatepass")
        return dumps_keeping(data, original, text, style).encode("utf-8", "surrogatepass")
    return dumps_plain(data, style).encode("utf-8", "surrogatepass")


def _orjson_wrote(original: Any, raw: bytes) -> bool:
    """True if ``raw`` is byte for byte what ``orjson.dumps(original)`` writes."""
    try:
        return orjson.dumps(original) == raw
    except TypeError:  # integers past 64 bits, lone surrogates: not orjson's text
        return False


def loads_record(body: bytes | memoryview) -> Any:
    """Parse one JSON record; orjson first, the stdlib for what orjson refuses."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        # orjson rejects integers past 64 bits and lone surrogate escapes, which are
        # valid JSON; the stdlib parses both (and raises ValueError on real garbage).
        # NaN/Infinity are not JSON at all and stay errors.
        def _no_constants(name: str) -> Any:
            raise ValueError(f"{name} is not valid JSON")

        return json.loads(bytes(body).decode("utf-8"), parse_constant=_no_constants)


# --- codecs: how a block's text sits in its record -------------------------------

Codec = str
"""``"str"``: a string field. ``"json"``: an object shown as JSON text."""


def encode_slot(codec: Codec, old: Any, text: str) -> Any:
    """The new field value for a block whose text became ``text``."""
    if codec == "json":
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return {"ctx_note": text}
        return value if isinstance(value, dict) else {"ctx_note": text}
    return text


class Format:
    """Base class of a JSONL transcript format (one record per line)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    units: ClassVar[str] = "lines"
    skips_invalid_lines: ClassVar[bool] = False
    """True when the format's own client reads past a line that is not JSON (Claude
    Code, Codex): ``on_invalid = "auto"`` then keeps such a line with a warning."""
    lazy_texts: ClassVar[bool] = False
    """True when :meth:`build` may leave long texts in the input (:class:`Span`): the
    block texts at :meth:`text_path`, and the long strings under :meth:`lazy_fields`.
    A reader of a record's ``data`` then meets a span where such a text was, which
    ``read_text`` or :func:`hydrate` reads back (the dump does); the format's own
    readers and the stages reading its records must expect that (OpenAI chat: none;
    Claude Code: ``prune_sidecars``, ``update_usage``)."""
    shares_strings: ClassVar[bool] = False
    """True when records repeat many short values (a session id, a working directory,
    a version on every line): :meth:`build` makes equal ones one object
    (:func:`share_strings`), except those of :attr:`unique_fields`."""
    unique_fields: ClassVar[frozenset[str]] = frozenset()
    """Top-level fields whose values hardly ever repeat (a timestamp): not shared."""
    incremental: ClassVar[bool] = False
    """True when a record's output depends only on its own message and the records
    before it (no fix-up reaches back, ``build`` keeps the messages it is handed):
    then a re-run of a grown file may keep a previous run's prefix (pipeline/rerun.py)."""

    # -- to implement -------------------------------------------------------------

    def sniff(self, records: Sequence[Any]) -> bool:
        """True if the first parsed records look like this format."""
        raise NotImplementedError

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """The message a record holds, or None for a record the model never sees.

        Raises:
            TranscriptError: the record is not of this format at all.
        """
        raise NotImplementedError

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """A copy of ``data`` that holds ``new`` instead of ``old``."""
        data = self.apply_block_texts(data, old, new)
        return data

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """A record for a message a stage created (a nudge, a summary)."""
        raise NotImplementedError

    def fixup(self, plan: list[OutRecord]) -> None:
        """Repair cross-record links after records were dropped or added (default: none)."""

    def keep_passthrough(self, record: Record, anchor_kept: bool) -> bool:
        """Whether a record the model never sees stays, given its preceding message's fate."""
        return anchor_kept

    def resume_start(self, records: Sequence[Record]) -> int | None:
        """Key of the record after which a resumed session's context starts.

        ``-1``: the whole file; ``None`` (the default): the format is never resumed
        from its file. See :attr:`ctxcli.core.model.Conversation.resume_start`.
        """
        return None

    def skeleton(self, data: Any) -> Any:
        """What an incremental re-run needs of a kept record besides its message: the
        fields :meth:`resume_start` reads, say (None: nothing). JSON-able and small,
        it is stored in the manifest for every kept record."""
        return None

    def text_path(self, block: Block) -> Path_ | None:
        """Where in its record ``block``'s text is a string of its own (None: nowhere,
        it is made from the record). A format with :attr:`lazy_texts` leaves a long
        text found there in the input. Default: a ``"str"`` slot's path."""
        slot = block.slot
        return slot[0] if slot is not None and slot[1] == "str" else None

    def text_source(self, block: Block, data: Any) -> TextSpan | None:
        """For a long block text made from record ``data`` (not a string of its own,
        see :meth:`text_path`): what makes it again when it is read, so a format with
        :attr:`lazy_texts` need not hold it. Default: None (the text is held)."""
        return None

    def lazy_fields(self, data: dict[str, Any]) -> Iterable[str]:
        """Top-level fields of record ``data`` whose long strings (inside a nested
        object or array) a format with :attr:`lazy_texts` leaves in the input too,
        besides its message's block texts. Every reader of those fields must expect a
        :class:`~ctxcli.core.model.LazyText` (``read_text``, ``hydrate``). Default: none."""
        return ()

    def check(self, doc: Document) -> list[Problem]:
        """Problems of this format beyond tool pairing (default: none); see ``ctx validate``."""
        return []

    # -- shared ---------------------------------------------------------------------

    @staticmethod
    def apply_block_texts(data: Any, old: Message, new: Message) -> Any:
        """Write changed block texts back through their slots (path, codec)."""
        old_by_slot = {b.slot: b for b in old.blocks if b.slot is not None}
        for block in new.blocks:
            if block.slot is None:
                continue
            before = old_by_slot.get(block.slot)
            if before is not None and _same_text(before, block):
                continue
            path, codec = block.slot
            data = set_in(data, path, encode_slot(codec, get_in(data, path), block.text))
        return data

    def load(self, raw: Input, path: str, *, on_invalid: str = "auto") -> Document:
        """Parse JSONL bytes into a document (see :func:`ctxcli.formats.load`)."""
        if self.lazy_texts:
            return self.build_as_parsed(raw, path, [], iter_records(raw, path), on_invalid)
        records = parse_lines(raw, path, on_invalid=self.on_invalid(on_invalid))
        return self.build(raw, path, records)

    def build_as_parsed(
        self,
        raw: Input,
        path: str,
        parsed: list[Record],
        rest: Iterator[Record],
        on_invalid: str = "auto",
    ) -> Document:
        """:meth:`build` over records still being parsed (``parsed``, then ``rest``).

        For a format with :attr:`lazy_texts`: each record's message is made, and its
        long texts left in the input, as soon as the record is parsed, so the parsed
        texts of the whole file never exist at once. Errors are those of
        :func:`parse_lines` then :meth:`build`: a line that is not JSON (unless kept)
        is named before a record that is not of the format, wherever they are.
        """
        keep = self.on_invalid(on_invalid) == "keep"
        records: list[Record] = []
        warnings: list[str] = []
        pages = Pages(raw)
        seen: dict[str, str] | None = {} if self.shares_strings else None
        for rec in itertools.chain(parsed, rest):
            key = len(records)
            records.append(rec)
            if rec.invalid is not None:
                if not keep:
                    raise_first_invalid([rec], path)
                warnings.append(f"{path}:{rec.line}: {rec.invalid}; kept unchanged")
                continue
            if rec.data is None or rec.kept:
                continue
            if seen is not None and type(rec.data) is dict:
                share_strings(rec.data, seen, self.unique_fields)
            try:
                message = self.to_message(rec.data, key, rec.line, path)
            except TranscriptError:
                if not keep:  # a line that is not JSON further on is named first
                    raise_first_invalid(list(rest), path)
                raise
            if len(rec.raw) >= LAZY_MIN_CHARS:
                message = _leave_in_input(self, rec, message, pages)
            rec.message = message
        return self.assemble(raw, path, records, warnings)

    def on_invalid(self, on_invalid: str) -> str:
        """``"keep"`` or ``"error"``: what ``on_invalid`` (maybe ``"auto"``) means here."""
        if on_invalid == "auto":
            return "keep" if self.skips_invalid_lines else "error"
        return on_invalid

    def build(self, raw: Input, path: str, records: list[Record]) -> Document:
        """Attach messages to parsed records."""
        warnings: list[str] = []
        pages = Pages(raw) if self.lazy_texts else None
        seen: dict[str, str] | None = {} if self.shares_strings else None
        for key, rec in enumerate(records):
            if rec.invalid is not None:
                warnings.append(f"{path}:{rec.line}: {rec.invalid}; kept unchanged")
                continue
            if rec.data is None or rec.kept:
                continue
            if seen is not None and type(rec.data) is dict:
                share_strings(rec.data, seen, self.unique_fields)
            message = self.to_message(rec.data, key, rec.line, path)
            if pages is not None and len(rec.raw) >= LAZY_MIN_CHARS:
                message = _leave_in_input(self, rec, message, pages)
            rec.message = message
        return self.assemble(raw, path, records, warnings)

    def record_from_data(self, data: Any, key: int, path: str) -> Record:
        """A record for an already parsed object (a message dict handed in by a program).

        Its ``raw`` is empty: such records are never written as bytes, only planned
        (see :meth:`plan`); ``line`` is ``key + 1`` so errors still name a position.
        """
        rec = Record(b"", key + 1, data)
        rec.message = self.to_message(data, key, key + 1, path)
        return rec

    def assemble(
        self, raw: Input, path: str, records: list[Record], warnings: list[str] | None = None
    ) -> Document:
        """The document of records whose messages are attached already.

        A message's ``key`` must be its record's index: :meth:`plan` looks it up there.
        """
        messages = [rec.message for rec in records if rec.message is not None]
        warnings = warnings if warnings is not None else []
        # Stages see every record too (read-only), to act on what the model never
        # sees through RecordEdits; see docs/ARCHITECTURE.md.
        meta = {
            "records": tuple(
                SourceRecord(key, rec.data, len(rec.raw), rec.message is not None)
                for key, rec in enumerate(records)
            ),
            "resume_start": self.resume_start(records),
        }
        conv = Conversation(tuple(messages), self.name, meta)
        return Document(path, self, raw, records, conv, warnings)

    def plan(self, doc: Document, conv: Conversation, start: int = 0) -> list[OutRecord]:
        """Lay out the output: which records are copied, changed, dropped or new.

        ``start`` > 0 lays out only the records from there on (an incremental re-run:
        the ones before are the previous run's, and the stages left their messages
        alone); a message a stage created among them is an error.
        """
        kept: dict[int, Message] = {}
        inserts: dict[int | None, list[Message]] = {}
        prev: int | None = None
        frozen = conv.frozen if start else 0
        seen_message = frozen > 0
        for msg in conv.messages[frozen:]:
            if msg.key is None:
                if start and prev is None:
                    raise PrefixChanged("a stage created a message in the kept prefix")
                inserts.setdefault(prev, []).append(msg)
            elif msg.key < start:
                raise PrefixChanged("a message of the kept prefix moved")
            else:
                kept[msg.key] = msg
                prev = msg.key
        plan: list[OutRecord] = []
        anchor_kept = True
        edits = conv.record_edits

        def emit_new(after: int | None, neighbour: Any) -> None:
            for m in inserts.pop(after, []):
                plan.append(OutRecord(State.NEW, None, self.new_record(m, neighbour), m))

        records = doc.records
        for key in range(start, len(records)):
            rec = records[key]
            if rec.message is None:
                if key in edits.drop or key in edits.keep:
                    keep = key not in edits.drop
                else:
                    keep = rec.data is None or self.keep_passthrough(rec, anchor_kept)
                plan.append(OutRecord(State.COPY if keep else State.DROPPED, rec, rec.data))
                _strip_fields(plan[-1], edits.strip.get(key))
                _set_values(plan[-1], edits.set_values.get(key))
                continue
            if not seen_message:
                seen_message = True
                emit_new(None, rec.data)
            new = kept.get(key)
            if new is None:
                anchor_kept = False
                plan.append(OutRecord(State.DROPPED, rec, rec.data, rec.message))
                continue
            anchor_kept = True
            if new is rec.message or new == rec.message:
                plan.append(OutRecord(State.COPY, rec, rec.data, new))
            else:
                data = self.apply(rec.data, rec.message, new)
                # A format may decline a change (signed thinking is never rewritten):
                # the record is then copied byte-for-byte, not re-serialised.
                state = State.COPY if data is rec.data else State.CHANGED
                plan.append(OutRecord(state, rec, data, new))
            _strip_fields(plan[-1], edits.strip.get(key))
            _set_values(plan[-1], edits.set_values.get(key))
            emit_new(key, rec.data)
        for after in list(inserts):
            emit_new(after, None)
        self.fixup(plan)
        return plan

    def dump(
        self,
        doc: Document,
        conv: Conversation,
        blobs: OriginalsSink,
        *,
        start: int = 0,
        into: Writable | None = None,
    ) -> tuple[bytes, RestoreScript]:
        """Serialise the output and the script that turns it back into the input.

        ``start`` > 0 (an incremental re-run) leaves out the first ``start`` records,
        which must be copied unchanged: their output is the previous run's. With
        ``into`` (a file), the output is written there as it is made and the bytes
        returned are empty. A format overriding ``dump`` without ``into`` gets its
        output written there by the caller.
        """
        plan = self.plan(doc, conv, start)
        script = RestoreScript()
        parts: list[bytes | memoryview] = []
        # With ``into``, the parts go out every 4 MB of new bytes: a session whose
        # records were relinked is mostly changed records, whose new bytes would all be
        # held until the end (100 MB of a 1 GB Claude Code session's peak).
        fresh = 0
        live = [i for i, r in enumerate(plan) if r.state is not State.DROPPED]
        last_live = live[-1] if live else -1
        del live
        # Each planned record is let go once written: a changed one holds its new data
        # (90 MB of relinked records in a 1 GB Claude Code session).
        plan.reverse()
        for i in range(len(plan)):
            rec = plan.pop()
            if rec.state is State.DROPPED:
                assert rec.orig is not None
                script.original(blobs.add_original(rec.orig.raw, _texts_of(rec.orig)))
                continue
            orig = rec.orig
            if rec.state is State.COPY and orig is not None:
                if orig.terminator or i == last_live:
                    parts.append(orig.raw)
                    script.copy()
                    continue
                # An unterminated last line that is no longer last needs a newline.
                parts.append(bytes(orig.raw) + b"\n")
                script.original(blobs.add_original(orig.raw))
                script.skip()
                continue
            try:
                if orig is not None:
                    lead = BOM if orig.has_bom else b""
                    body = dumps_like(hydrate(rec.data), orig.body, orig.data)
                    end = orig.terminator or (b"\n" if i != last_live else b"")
                else:
                    lead, body = b"", dumps_like(hydrate(rec.data), _style_sample(doc))
                    end = b"\n" if (i != last_live or _ends_with_newline(doc)) else b""
            except (ValueError, RecursionError) as exc:
                raise _unwritable(doc, rec, exc) from None
            if orig is not None:
                script.original(blobs.add_original(orig.raw, _texts_of(orig)))
            parts.append(lead + body + end)
            script.skip()
            fresh += len(parts[-1])
            if into is not None and fresh >= RELEASE_BYTES:
                join_parts(parts, into)
                parts.clear()
                fresh = 0
        return join_parts(parts, into), script


PLUGIN_GROUP = "ctxcli.formats.v1"
"""Entry-point group of third-party formats (versioned, so a v2 interface can coexist)."""

BUILTIN_MODULES = (
    "ctxcli.formats.claude_code",
    "ctxcli.formats.codex",
    "ctxcli.formats.langchain",
    "ctxcli.formats.anthropic",  # before openai_chat, whose sniff takes any {role} line
    "ctxcli.formats.openai_chat",  # the fallback for plain {role, content} lines
    "ctxcli.formats.json_doc",  # whole JSON documents, tried before JSONL parsing
    "ctxcli.formats.openhands",  # OpenHands event lists (the parts of its output.jsonl)
)
"""The built-in formats in auto-detection order: more specific formats first."""


def _admit(fmt: Format, package: str) -> Format:
    if not isinstance(fmt, Format) or not fmt.name:
        raise ConfigError(
            f"format {getattr(fmt, 'name', None) or fmt!r} from {package}: register an instance "
            "of a ctxcli.formats.Format subclass with a non-empty name."
        )
    return fmt


FORMAT_REGISTRY: Registry[Format] = Registry(
    kind="format",
    group=PLUGIN_GROUP,
    builtins=lambda: BUILTIN_MODULES,
    name_of=lambda fmt: fmt.name,
    module_of=lambda fmt: type(fmt).__module__,
    how="decorate a Format subclass in {module} with @ctxcli.formats.register_format",
    admit=_admit,
    same=lambda a, b: type(a) is type(b),
)
"""Every format: the built-in modules above, then ``ctxcli.formats.v1`` plugins."""

F = TypeVar("F", bound="Format | type[Format]")


def register_format(fmt: F) -> F:
    """Declare a format; the registry adds it when it loads the format's module.

    Use it as a class decorator (the class is instantiated once) or call it with an
    instance; either way the argument is returned unchanged.
    """
    FORMAT_REGISTRY.register(fmt() if isinstance(fmt, type) else fmt)
    return fmt


def _unwritable(doc: Document, rec: OutRecord, exc: Exception) -> TranscriptError:
    """A changed record that cannot be written as JSON: refused, never written wrongly."""
    line = rec.orig.line if rec.orig is not None else None
    reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return TranscriptError(
        doc.path,
        line,
        f"cannot write the changed record as JSON ({reason}); "
        "leave this record out of the reduction or fix the value",
    )


def _strip_fields(out: OutRecord, fields: frozenset[str] | None) -> None:
    """Remove top-level ``fields`` a stage asked to strip from a kept record."""
    data = out.data
    if not fields or out.state is State.DROPPED or not isinstance(data, dict):
        return
    if any(f in data for f in fields):
        out.touch()
        out.data = {k: v for k, v in data.items() if k not in fields}


def _set_values(out: OutRecord, values: Mapping[tuple[str | int, ...], Any] | None) -> None:
    """Set the values a stage asked for inside a kept record."""
    if not values or out.state is State.DROPPED:
        return
    data = out.data
    for path, value in values.items():
        try:
            if get_in(data, path) == value:
                continue
        except (KeyError, IndexError, TypeError):
            pass
        data = set_in(data, path, value)
    if data is not out.data:
        out.touch()
        out.data = data


def _texts_of(record: Record) -> list[str]:
    """The block texts a record held: what its original may share with offloaded files."""
    message = record.message
    return [block.text for block in message.blocks] if message is not None else []


def _style_sample(doc: Document) -> bytes:
    for rec in doc.records:
        if rec.data is not None:
            return rec.body
    return b""


def _ends_with_newline(doc: Document) -> bool:
    return not doc.records or doc.records[-1].terminator != b""


def parse_lines(raw: Input, path: str, *, on_invalid: str = "error") -> list[Record]:
    """Split JSONL bytes into records, parsing each line.

    Blank lines are kept as records without data. A line that is not JSON is an
    error naming the line, or (``on_invalid="keep"``) a record passed through as is.
    """
    records = _parse_lines(raw, path)
    if on_invalid != "keep":
        raise_first_invalid(records, path)
    return records


def raise_first_invalid(records: Sequence[Record], path: str) -> None:
    """Raise the error naming the first record that is not JSON, if there is one."""
    for rec in records:
        if rec.invalid is not None:
            raise TranscriptError(path, rec.line, rec.invalid, remedy=Remedy.KEEP_INVALID)


def _parse_lines(raw: Input, path: str) -> list[Record]:
    return list(iter_records(raw, path))


def iter_records(raw: Input, path: str) -> Iterator[Record]:
    """The records of ``raw`` one by one, parsed (see :func:`parse_lines`), invalid
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


def text_block(kind: Kind, text: Any, path: Path_, **kw: Any) -> Block:
    """A block whose text is the string field at ``path``."""
    return Block(kind, text if isinstance(text, str) else "", slot=(path, "str"), **kw)


Sniffer = Callable[[Sequence[Any]], bool]
