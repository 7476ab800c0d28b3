"""Lazy texts: long texts left in the input, read again only when asked.

A format opts in with :class:`LazyTexts`: :meth:`~ctxcli.formats.format.Format.build`
then puts a :class:`Span` (where the text's JSON string sits in its record's bytes) in
place of every long block text and every long string under the fields the format
names, and makes the short strings records repeat one object each
(:func:`share_strings`). A gigabyte session is then held as spans and skeletons, not
as its parsed texts.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any, ClassVar

import orjson

from ctxcli.core.io import Pages
from ctxcli.core.model import Block, LazyBlock, LazyText, Message, TextSpan
from ctxcli.formats.jsontext import loads_record
from ctxcli.formats.lines import Record
from ctxcli.formats.slots import Path_, get_in

__all__ = [
    "LAZY_MIN_CHARS",
    "LazyTexts",
    "SHARED_MAX_CHARS",
    "Span",
    "leave_in_input",
    "same_text",
    "share_strings",
]

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
        """Read the text again from the input."""
        text: str = loads_record(self.view[self.start : self.end])
        self.pages.read(self.end - self.start)  # the pages read go back, as the parse's did
        return text

    def __repr__(self) -> str:
        return f"Span({self.start}, {self.end})"


class LazyTexts:
    """Opt-in for large transcripts: long texts left in the input, short ones shared.

    A mixin of :class:`~ctxcli.formats.format.Format`; a format that needs none of it
    leaves the switches off and the hooks alone. With :attr:`lazy_texts`, ``build``
    puts a :class:`Span` where each long text of the record was; with
    :attr:`shares_strings`, it makes equal short strings one object.
    """

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

    def text_path(self, block: Block) -> Path_ | None:
        """Return where in its record ``block``'s text is a string of its own.

        Where in its record ``block``'s text is a string of its own (None: nowhere,
        it is made from the record). A format with :attr:`lazy_texts` leaves a long
        text found there in the input. Default: a ``"str"`` slot's path.
        """
        slot = block.slot
        return slot[0] if slot is not None and slot[1] == "str" else None

    def text_source(self, block: Block, data: Any) -> TextSpan | None:
        """Return what makes a long block text again when it is read.

        For a long block text made from record ``data`` (not a string of its own,
        see :meth:`text_path`): what makes it again when it is read, so a format with
        :attr:`lazy_texts` need not hold it. Default: None (the text is held).
        """
        return None

    def lazy_fields(self, data: dict[str, Any]) -> Iterable[str]:
        """Name the fields of ``data`` whose long strings stay in the input too.

        Top-level fields of record ``data`` whose long strings (inside a nested
        object or array) a format with :attr:`lazy_texts` leaves in the input too,
        besides its message's block texts. Every reader of those fields must expect a
        :class:`~ctxcli.core.model.LazyText` (``read_text``, ``hydrate``). Default: none.
        """
        return ()


def same_text(before: Block, after: Block) -> bool:
    """Whether two blocks hold the same text, reading a lazy one only when needed."""
    if before is after:
        return True
    if isinstance(before, LazyBlock) and len(after.text) != before.span.chars:
        return False
    return before.text == after.text


def leave_in_input(
    fmt: LazyTexts, rec: Record, message: Message | None, pages: Pages
) -> Message | None:
    """Leave ``rec``'s long texts in the input.

    Leave ``rec``'s long texts in the input: its message's string-field block texts,
    and every long string under the fields :meth:`LazyTexts.lazy_fields` names.
    """
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


def _lazy_blocks(fmt: LazyTexts, rec: Record, message: Message, finder: _Finder) -> Message:
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
