"""Where a block's text sits in its record: a path into the parsed JSON and a codec.

A format maps each block of a message to a *slot* of its record, ``(path, codec)``: the
keys and indices that lead to the field, and how the text is stored there (``"str"``: the
field is the text; ``"json"``: an object shown as JSON text). Writing a changed text back
copies only the containers on the path (:func:`set_in`), so the rest of the record stays
the very objects that were parsed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from ctxcli.core.model import Block, Kind

__all__ = [
    "Codec",
    "Path_",
    "delete_many",
    "encode_slot",
    "get_in",
    "json_text",
    "set_in",
    "text_block",
]

Path_ = tuple[str | int, ...]


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


def delete_many(data: Any, container: Path_, indices: Sequence[int]) -> Any:
    """Return a copy of ``data`` without the listed indices of the list at ``container``."""
    items = get_in(data, container)
    drop = set(indices)
    return set_in(data, container, [x for i, x in enumerate(items) if i not in drop])


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


def text_block(kind: Kind, text: Any, path: Path_, **kw: Any) -> Block:
    """A block whose text is the string field at ``path``."""
    return Block(kind, text if isinstance(text, str) else "", slot=(path, "str"), **kw)


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (what a TOOL_CALL block shows)."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:  # lone surrogates or integers past 64 bits
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
