"""JSON as text: where values sit in a document, and writing a changed value in place.

A record a stage changed must be written again, but only what the stage changed may
look different: a number like ``1e400``, ``1E5`` or ``0.10000000000000001`` does not
survive a parse and a re-serialisation (it comes back ``null``, ``100000.0``, ``0.1``
or as the non-JSON ``Infinity``). :func:`dumps_keeping` serialises the new value and
copies the original text of every value that is still the same, so untouched fields
keep their exact bytes. The scanner only has to find where values start and end in
text that is already known to be valid JSON.

A changed record is written in its neighbours' style (:func:`style_of`,
:func:`dumps_like`), and a record is parsed by orjson with the stdlib for what orjson
refuses (:func:`loads_record`).
"""

from __future__ import annotations

import json
import json.scanner
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from mmap import mmap
from typing import Any

import orjson

from ctxcli.core.model import hydrate

__all__ = [
    "Style",
    "array_items",
    "dumps_keeping",
    "dumps_like",
    "dumps_plain",
    "item_spans",
    "loads_record",
    "numbers_may_change",
    "member_span",
    "member_spans",
    "skip_value",
    "skip_ws",
    "style_of",
]

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_STRUCT = re.compile(r'[\[\]{}"]')
_SCALAR = re.compile(r"[^,\]}\s]+")
_MINUS_ZERO = re.compile(r"[:,\[]\s*-0\s*[,\]}]")  # the integer -0 parses as 0
_MINUS_ZERO_BYTES = re.compile(_MINUS_ZERO.pattern.encode())
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def skip_ws(text: str, pos: int) -> int:
    """The index of the first non-space character at or after ``pos``."""
    m = _WS.match(text, pos)
    return m.end() if m else pos


def skip_value(text: str, pos: int) -> int:
    """The index just past the JSON value starting at ``pos`` (builds no objects)."""
    c = text[pos]
    if c == '"':
        m = _STRING.match(text, pos)
        assert m is not None
        return m.end()
    if c not in "[{":
        m = _SCALAR.match(text, pos)
        assert m is not None
        return m.end()
    depth = 0
    while True:
        m = _STRUCT.search(text, pos)
        assert m is not None
        ch = m.group()
        if ch == '"':
            s = _STRING.match(text, m.start())
            assert s is not None
            pos = s.end()
            continue
        depth += 1 if ch in "[{" else -1
        pos = m.end()
        if depth == 0:
            return pos


_WS_B = re.compile(rb"[ \t\n\r]*")
_STRING_B = re.compile(_STRING.pattern.encode(), re.S)
_STRUCT_B = re.compile(_STRUCT.pattern.encode())
_OPEN, _CLOSE, _QUOTE, _COMMA = (ord(c) for c in '[]",')


def array_items(
    data: bytes | mmap, start: int, seen: Callable[[int], None] | None = None
) -> tuple[list[tuple[int, int]], list[bytes]] | None:
    """Where the objects and arrays of the JSON array at ``start`` sit in ``data``.

    The bytes version of :func:`item_spans` for a whole file that is not parsed as one
    value (a mapped tau-bench results file): nothing but the structure is read, and
    the items' own JSON is left for the caller to parse one at a time. Returns the
    spans and the separators (``seps[0]`` follows ``[``, ``seps[k]``, with its comma,
    precedes item k, ``seps[-1]`` precedes ``]``), or None where the array does not
    hold only objects and arrays, or is not closed. ``seen`` is told where each item
    ends (to give a map's pages back as the scan goes).
    """
    if data[start] != _OPEN:
        return None
    spans: list[tuple[int, int]] = []
    seps: list[bytes] = []
    mark = start + 1
    pos = _skip_ws_b(data, mark)
    if pos < len(data) and data[pos] == ord("]"):
        return spans, [bytes(data[mark:pos])]
    while pos < len(data):
        seps.append(bytes(data[mark:pos]))
        end = _skip_container_b(data, pos)
        if end is None:
            return None
        spans.append((pos, end))
        if seen is not None:
            seen(end)
        mark = end
        pos = _skip_ws_b(data, end)
        if pos >= len(data):
            return None
        if data[pos] == ord("]"):
            seps.append(bytes(data[mark:pos]))
            return spans, seps
        if data[pos] != _COMMA:
            return None
        pos = _skip_ws_b(data, pos + 1)
    return None


def _skip_ws_b(data: bytes | mmap, pos: int) -> int:
    m = _WS_B.match(data, pos)
    return m.end() if m else pos


def _skip_container_b(data: bytes | mmap, pos: int) -> int | None:
    """Just past the object or array at ``pos``, or None (not one, or not closed)."""
    if data[pos] not in (_OPEN, ord("{")):
        return None
    depth = 0
    while True:
        m = _STRUCT_B.search(data, pos)
        if m is None:
            return None
        ch = data[m.start()]
        if ch == _QUOTE:
            string = _STRING_B.match(data, m.start())
            if string is None:
                return None
            pos = string.end()
            continue
        depth += 1 if ch in (_OPEN, ord("{")) else -1
        pos = m.end()
        if depth == 0:
            return pos


# Within one record the stdlib's C scanner finds where a value ends several times
# faster than the loop above (it builds the value, which a record can afford);
# numbers stay text: no conversion, no limit on digits.
_DECODER: Any = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=str)
_SCAN: Any = json.scanner.make_scanner(_DECODER)


def _end_of(text: str, pos: int) -> int:
    """Like :func:`skip_value`, for values inside one record."""
    if text[pos] not in '[{"':
        m = _SCALAR.match(text, pos)
        assert m is not None
        return m.end()
    end: int = _SCAN(text, pos)[1]
    return end


def member_spans(
    text: str, start: int, skip: Callable[[str, int], int] = skip_value
) -> dict[str, tuple[int, int, int]]:
    """Each member of the object at ``start``: key -> (key start, key end, value start).

    A key given twice keeps its last place, as a parse keeps its last value.
    """
    members: dict[str, tuple[int, int, int]] = {}
    pos = start + 1  # past "{"
    while True:
        pos = skip_ws(text, pos)
        if text[pos] == "}":
            return members
        end = skip(text, pos)
        name = text[pos + 1 : end - 1]
        if "\\" in name:
            name = json.loads(text[pos:end])
        value = skip_ws(text, skip_ws(text, end) + 1)  # past ":"
        members[name] = (pos, end, value)
        pos = skip_ws(text, skip(text, value))
        if text[pos] == ",":
            pos += 1


def member_span(text: str, key: str) -> tuple[int, int] | None:
    """The span of the value of top-level member ``key`` of the object in ``text``."""
    found = member_spans(text, skip_ws(text, 0)).get(key)
    if found is None:
        return None
    return found[2], skip_value(text, found[2])


def item_spans(
    text: str, start: int, skip: Callable[[str, int], int] = skip_value
) -> tuple[list[tuple[int, int]], list[str]]:
    """Spans of the items of the array at ``start`` and the text between them.

    ``seps[0]`` follows ``[``, ``seps[k]`` (with its comma) precedes item k, and
    ``seps[-1]`` precedes ``]``.
    """
    spans: list[tuple[int, int]] = []
    seps: list[str] = []
    pos = start + 1
    mark = pos
    pos = skip_ws(text, pos)
    if text[pos] == "]":
        return spans, [text[mark:pos]]
    while True:
        seps.append(text[mark:pos])
        end = skip(text, pos)
        spans.append((pos, end))
        mark = end
        pos = skip_ws(text, end)
        if text[pos] == "]":
            seps.append(text[mark:pos])
            return spans, seps
        pos = skip_ws(text, pos + 1)  # past ","


# -- writing -----------------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    """How new JSON text is laid out: separators, escaping, and indentation.

    ``indent`` (None: one line) is the step per level; ``base`` is the indentation
    of the line the value starts on, for values inside a pretty-printed document.
    """

    comma: str = ","
    colon: str = ":"
    ascii: bool = False
    indent: str | None = None
    newline: str = "\n"
    base: str = ""

    def between(self, depth: int) -> str:
        """The text between two members or items at nesting ``depth``."""
        if self.indent is None:
            return self.comma
        return "," + self.newline + self.base + self.indent * (depth + 1)

    def opening(self, depth: int) -> str:
        """Return the text after an opening bracket at nesting ``depth``."""
        return "" if self.indent is None else self.newline + self.base + self.indent * (depth + 1)

    def closing(self, depth: int) -> str:
        """Return the text before a closing bracket at nesting ``depth``."""
        return "" if self.indent is None else self.newline + self.base + self.indent * depth


def dumps_plain(value: Any, style: Style, depth: int = 0) -> str:
    """``value`` as JSON text in ``style``.

    Raises:
        ValueError: ``value`` holds a number JSON cannot carry (infinite or NaN).
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not a JSON number (beyond the range of a double)")
    if style.indent is None and not style.ascii and style.comma == ",":
        try:
            out = orjson.dumps(value).decode("utf-8")
        except TypeError:
            pass  # lone surrogates or integers past 64 bits: the stdlib copes with both
        else:
            if "null" not in out or not _has_nonfinite(value):
                return out
            raise ValueError("a number beyond the range of a double is not JSON")
    try:
        text = json.dumps(
            value,
            ensure_ascii=style.ascii,
            separators=(style.comma if style.indent is None else ",", style.colon),
            indent=style.indent,
            allow_nan=False,
        )
    except ValueError:
        raise ValueError("a number beyond the range of a double is not JSON") from None
    if style.indent is not None:
        text = text.replace("\n", style.newline + style.base + style.indent * depth)
    # A lone surrogate (a valid \ud800 escape) has no UTF-8 form: keep it escaped.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nonfinite(v) for v in value)
    return False


def dumps_keeping(new: Any, old: Any, text: str, style: Style) -> str:
    """``new`` as JSON text; every value equal to its place in ``old`` keeps its text.

    ``old`` is what ``text`` parses to. Values are matched by place (object keys;
    list items by identity first, as a stage that drops items keeps the others'
    objects, else by index): what is the same, with the same types all the way
    down, is copied from ``text``; what changed is written in ``style``.

    Raises:
        ValueError: a changed value holds a number JSON cannot carry.
    """
    if not numbers_may_change(old, text):
        return dumps_plain(new, style)
    return _splice(new, old, text, skip_ws(text, 0), style, 0)


def numbers_may_change(old: Any, text: str | bytes) -> bool:
    """False if writing ``old`` again cannot change a number in ``text`` (its source).

    Integers, strings, booleans and null written again have the same value (only
    the escaping of a string may differ): most records need no splice. A float may
    have been written otherwise (``1E5``, ``0.10``, ``1e400``), and so may ``-0``.
    """
    if _has_float(old):
        return True
    # The substring test first: it runs at memchr speed, the regex a step per byte.
    if isinstance(text, bytes):
        return b"-0" in text and _MINUS_ZERO_BYTES.search(text) is not None
    return "-0" in text and _MINUS_ZERO.search(text) is not None


def _has_float(value: Any) -> bool:
    """True if ``value`` holds a float: the only parsed values whose text can change."""
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def _splice(new: Any, old: Any, text: str, start: int, style: Style, depth: int) -> str:
    if new is old or _same(new, old):
        return text[start : _end_of(text, start)]
    if isinstance(new, dict) and isinstance(old, dict) and text[start] == "{":
        if not new:
            return "{}"
        members = member_spans(text, start, _end_of)
        parts = []
        for key, value in new.items():
            found = members.get(key) if key in old else None
            if found is None:
                name = dumps_plain(key, style)
                parts.append(name + style.colon + dumps_plain(value, style, depth + 1))
            else:
                k0, k1, v0 = found
                inner = _splice(value, old[key], text, v0, style, depth + 1)
                parts.append(text[k0:k1] + style.colon + inner)
        body = style.between(depth).join(parts)
        return "{" + style.opening(depth) + body + style.closing(depth) + "}"
    if isinstance(new, list) and isinstance(old, list) and text[start] == "[":
        if not new:
            return "[]"
        spans, _seps = item_spans(text, start, _end_of)
        where = {id(item): i for i, item in enumerate(old)}
        parts = []
        for i, value in enumerate(new):
            j = where.get(id(value))
            if j is None and i < len(old) and isinstance(value, dict | list):
                j = i if type(old[i]) is type(value) else None
            if j is None:
                parts.append(dumps_plain(value, style, depth + 1))
            else:
                parts.append(_splice(value, old[j], text, spans[j][0], style, depth + 1))
        body = style.between(depth).join(parts)
        return "[" + style.opening(depth) + body + style.closing(depth) + "]"
    return dumps_plain(new, style, depth)


def _same(new: Any, old: Any) -> bool:
    """Equal, with the same types all the way down (``1`` is not ``1.0`` or ``True``)."""
    if type(new) is not type(old):
        return False
    if isinstance(new, dict):
        return new.keys() == old.keys() and all(_same(v, old[k]) for k, v in new.items())
    if isinstance(new, list):
        return len(new) == len(old) and all(_same(a, b) for a, b in zip(new, old, strict=True))
    if isinstance(new, float):
        if math.isnan(new):
            return math.isnan(old)
        # -0.0 == 0.0, but it is written "-0.0": a changed sign is a change.
        return new == old and math.copysign(1.0, new) == math.copysign(1.0, old)
    return bool(new == old)


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
