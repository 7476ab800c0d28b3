"""JSONL dataset files carried as text: every row reduced in place, every file restored exactly."""

from __future__ import annotations

import json

import orjson
import pytest

from ctxcli.core.errors import CtxError, RestoreError
from ctxcli.datasets.jsonl import reduce_jsonl, restore_jsonl
from ctxcli.datasets.rows import STAT_COLUMNS, RowReducer
from support.dataset_rows import CONFIG, message_rows, text_rows

needs_shared = pytest.mark.real_data  # skips without ../shared (fails in CI)


def _jsonl(rows: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@needs_shared
def test_tau_bench_rows_come_back_byte_identical() -> None:
    raw = _jsonl(message_rows(60))
    reduced = reduce_jsonl(raw, RowReducer(CONFIG), "messages", name="part-0.jsonl")
    assert reduced.totals.rows == 60 and reduced.totals.errors == 0
    assert reduced.totals.tokens_after < 0.8 * reduced.totals.tokens_before
    for before, after in zip(raw.splitlines(), reduced.data.splitlines(), strict=True):
        row, out = orjson.loads(before), orjson.loads(after)
        # Nothing was added to a message, and the row's own fields are as they were.
        assert list(out) == [*row, *STAT_COLUMNS]
        assert all(set(m) <= set(o) for m, o in zip(out["messages"], row["messages"], strict=True))
        assert after.startswith(before[: before.index(b'"messages"')])
    back, rows = restore_jsonl(reduced.data, reduced.blobs, "messages", name="part-0.jsonl")
    assert back == raw and rows == 60


@needs_shared
def test_a_text_column_comes_back_byte_identical() -> None:
    raw = _jsonl(text_rows())
    reduced = reduce_jsonl(raw, RowReducer(CONFIG), "trajectory", name="t.jsonl")
    assert reduced.totals.errors == 0
    assert reduced.totals.bytes_after < reduced.totals.bytes_before
    back, rows = restore_jsonl(reduced.data, reduced.blobs, "trajectory", name="t.jsonl")
    assert back == raw and rows == len(text_rows())


CHAT = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 400},
]
TIGHT = {"stages": [{"use": "truncate_tool_output", "max_chars": 300}]}


def test_every_kind_of_line_comes_back_as_it_was() -> None:
    chat = json.dumps(CHAT, separators=(",", ":"))
    text = "".join(json.dumps(m) + "\n" for m in CHAT)
    lines = [
        b"\xef\xbb\xbf" + f'{{"messages": {chat}}}\r\n'.encode(),
        b"\n",
        b"   \n",
        b"not json\n",
        b"[1, 2]\n",
        b"{}\n",
        b'{"other": 1}  \n',
        f'{{"id": 1, "messages": {json.dumps(text)}, "n": 2.50}}\n'.encode(),  # a text column
        # A string escaped as no JSON writer does ("\/", upper-case hex): kept as a blob.
        (
            '{"messages": ' + json.dumps(text).replace("/", "\\/").replace("\\n", "\\u000A") + "}\n"
        ).encode(),
        f'{{"messages": {chat}}}'.encode(),  # no newline at the end
    ]
    raw = b"".join(lines)
    reduced = reduce_jsonl(raw, RowReducer(TIGHT), "messages", name="odd.jsonl")
    assert (reduced.totals.rows, reduced.totals.errors) == (8, 4)
    assert reduced.data.count(b"[ctx: output truncated") == 4
    assert len(reduced.data.splitlines()) == len(raw.splitlines())
    back, rows = restore_jsonl(reduced.data, reduced.blobs, "messages", name="odd.jsonl")
    assert back == raw and rows == 4
    # A dataset reduced already is refused: its columns lead to its own offload.
    with pytest.raises(CtxError, match=r"^again.jsonl:1: the row has ctx's columns already"):
        reduce_jsonl(reduced.data, RowReducer(TIGHT), "messages", name="again.jsonl")


def test_rows_changed_after_the_reduction_are_refused() -> None:
    raw = f'{{"messages": {json.dumps(CHAT)}}}\n'.encode()
    reduced = reduce_jsonl(raw, RowReducer(TIGHT), "messages", name="r.jsonl")
    row = orjson.loads(reduced.data)
    moved = {"ctx_error": None, **{k: v for k, v in row.items() if k != "ctx_error"}}
    bad_restore = {**row, "ctx_restore": '{"v": 1, "cell": 5}'}
    edited = {**row, "messages": [*row["messages"][:-1], {"role": "tool", "content": "x"}]}
    for changed, match in (
        (moved, "not the last members"),
        (bad_restore, "not one ctx wrote"),
        (edited, "changed after ctx reduced it"),
    ):
        with pytest.raises(RestoreError, match=match):
            restore_jsonl(orjson.dumps(changed) + b"\n", reduced.blobs, "messages", name="r.jsonl")
    with pytest.raises(RestoreError, match="missing"):
        restore_jsonl(reduced.data, {}, "messages", name="r.jsonl")
