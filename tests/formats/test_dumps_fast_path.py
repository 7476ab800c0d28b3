"""A changed record whose line is orjson's own text is written by orjson whole; that
must be exactly what splicing the unchanged values' original text gives."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli.formats.jsontext import dumps_keeping, dumps_like, style_of

_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
)
_json = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _change(value: Any, path: list[int], new_leaf: Any) -> Any:
    """A copy of ``value`` with one place (chosen by ``path``) replaced, the rest shared."""
    if isinstance(value, dict) and value and path:
        keys = list(value)
        key = keys[path[0] % len(keys)]
        return {**value, key: _change(value[key], path[1:], new_leaf)}
    if isinstance(value, list) and value and path:
        i = path[0] % len(value)
        return [*value[:i], _change(value[i], path[1:], new_leaf), *value[i + 1 :]]
    return new_leaf


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=5), _json, min_size=1, max_size=5),
    st.lists(st.integers(0, 10), max_size=4),
    _json,
)
def test_fast_path_equals_the_splice(old: dict[str, Any], path: list[int], leaf: Any) -> None:
    raw = orjson.dumps(old)
    new = _change(old, path, leaf)
    spliced = dumps_keeping(new, old, raw.decode(), style_of(raw)).encode()
    assert dumps_like(new, raw, old) == spliced


def test_a_line_not_in_orjson_text_keeps_its_numbers() -> None:
    raw = b'{"n":1.50,"big":1e2,"content":"old"}'
    old = orjson.loads(raw)
    new = {**old, "content": "new"}
    assert dumps_like(new, raw, old) == b'{"n":1.50,"big":1e2,"content":"new"}'


def test_a_changed_sign_of_zero_is_written() -> None:
    raw = b'{"x":0.0,"content":"old"}'
    old = orjson.loads(raw)
    new = {"x": -0.0, "content": "old"}
    spliced = dumps_keeping(new, old, raw.decode(), style_of(raw))
    assert spliced == '{"x":-0.0,"content":"old"}'
    assert dumps_like(new, raw, old) == spliced.encode()


def test_fast_path_falls_back_for_what_orjson_cannot_write() -> None:
    raw = b'{"n":1,"content":"old"}'
    old = orjson.loads(raw)
    big = {**old, "n": 2**70}  # past 64 bits: orjson refuses, the stdlib writes it
    spliced = dumps_keeping(big, old, raw.decode(), style_of(raw)).encode()
    assert dumps_like(big, raw, old) == spliced == b'{"n":1180591620717411303424,"content":"old"}'
    with pytest.raises(ValueError, match="not JSON"):
        dumps_like({**old, "n": float("inf")}, raw, old)
