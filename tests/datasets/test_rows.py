"""The row-level API: one trajectory per dataset cell, blobs content-addressed, no files."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli.api.remote import BlobReader, BlobWriter
from ctxcli.core.errors import RestoreError, TranscriptError
from ctxcli.core.protocols import sha256
from ctxcli.datasets.rows import (
    BlobStore,
    ReducedRow,
    RowReducer,
    blob_path,
    reduce_row,
    restore_row,
)
from ctxcli.pipeline.config import build_config
from support.paths import REPO, corpus, shared_transcripts

TIGHT = build_config(
    {
        "stages": [
            {"use": "truncate_tool_output", "max_chars": 500},
            {"use": "clear_tool_results", "max_tokens": 2000},
        ]
    },
    "rows test",
)


def _chat(n: int, output: str) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [{"role": "user", "content": "list the files"}]
    for i in range(n):
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "ls", "arguments": "{}"},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": output})
    return msgs


def test_messages_row_shrinks_and_restores() -> None:
    row = _chat(3, "x" * 5000)
    out = reduce_row(row, TIGHT, offload_root="s3://bucket/offload")
    assert isinstance(out.value, list)
    assert out.stats["tokens_after"] < out.stats["tokens_before"]
    assert out.stats["format"] == "openai_chat"
    tool = out.value[2]["content"]
    assert "s3://bucket/offload/" in tool and len(tool) < 5000
    assert restore_row(out.value, out.restore, out.blobs) == row


def test_identical_outputs_are_one_blob() -> None:
    out = reduce_row(_chat(3, "y" * 5000), TIGHT)
    # Three identical outputs offloaded: one blob for the text, one per changed line.
    text_digest = sha256(("y" * 5000).encode())
    assert text_digest in out.blobs
    assert out.stats["offloaded"] == 3
    cited = {m["content"].split("saved to ")[1].split(" ")[0] for m in out.value[2::2]}
    assert cited == {f"ctx-offload/{blob_path(text_digest)}"}


def test_text_and_object_rows_keep_their_type() -> None:
    row = _chat(2, "z" * 3000)
    text = "".join(orjson.dumps(m).decode() + "\n" for m in row)
    for value in (text, text.encode(), {"instance_id": "a", "messages": row}):
        out = reduce_row(value, TIGHT)
        assert type(out.value) is type(value)
        assert out.stats["bytes_after"] < out.stats["bytes_before"]
        assert restore_row(out.value, out.restore, out.blobs) == value


def test_reducer_pickles_and_reduces_the_same() -> None:
    reducer = RowReducer({"stages": [{"use": "truncate_tool_output", "max_chars": 500}]})
    clone = pickle.loads(pickle.dumps(reducer))
    row = _chat(1, "w" * 4000)
    assert clone(row).value == reducer(row).value


def test_restore_refuses_missing_or_altered_blobs() -> None:
    out = reduce_row(_chat(1, "v" * 4000), TIGHT)
    with pytest.raises(RestoreError, match="missing"):
        restore_row(out.value, out.restore, {})
    bad = {k: v + b"!" for k, v in out.blobs.items()}
    with pytest.raises(RestoreError, match="altered"):
        restore_row(out.value, out.restore, bad)
    edited = [*out.value[:-1], {**out.value[-1], "content": "edited"}]
    with pytest.raises(RestoreError, match="changed after"):
        restore_row(edited, out.restore, out.blobs)


def test_bad_rows_are_one_line_errors() -> None:
    with pytest.raises(TranscriptError, match="no messages"):
        reduce_row([])
    with pytest.raises(TranscriptError, match="is not a trajectory"):
        reduce_row(42)
    results = RowReducer().many(["not json\n", _chat(1, "ok")], on_error="keep")
    assert isinstance(results[0], TranscriptError) and "<row 0>:1" in str(results[0])
    assert not isinstance(results[1], Exception)


def test_store_writes_nothing_and_cites_fixed_length_paths(tmp_path: Path) -> None:
    store = BlobStore("root")
    cited = store.put("trunc", "../../etc/passwd", "text")
    assert cited == f"root/{blob_path(sha256(b'text'))}"
    assert len(store.path_for("trunc", "anything")) == len(cited)
    assert list(tmp_path.iterdir()) == [tmp_path / "work"] and not any(
        (tmp_path / "work").iterdir()
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", corpus(shared_transcripts()))
def test_real_transcripts_round_trip_as_text_and_values(path: Path) -> None:
    reducer = RowReducer(TIGHT, on_invalid="keep")
    raw = path.read_bytes()
    out = reducer(raw)
    assert restore_row(out.value, out.restore, out.blobs) == raw
    text_out = reducer(raw.decode("utf-8"))
    assert restore_row(text_out.value, text_out.restore, text_out.blobs) == raw.decode()
    if path.suffix == ".jsonl" and b"\\[REDACTED" not in raw:
        rows = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        listed = reducer(rows)
        assert restore_row(listed.value, listed.restore, listed.blobs) == rows


def test_readme_row_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (REPO / "docs" / "python.md").read_text("utf-8")
    section = readme.split("## Datasets of trajectories", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})
    before, after = (int(x) for x in capsys.readouterr().out.split(" -> "))
    assert after < before / 10


# Issue 34 item 11: the restore string comes from the dataset, so it is input like any
# other. The tries: 8 of 15 raised IndexError/TypeError and failed the whole map.
def _restore_of(out: ReducedRow) -> dict[str, Any]:
    info: dict[str, Any] = orjson.loads(out.restore)
    return info


def _with(info: dict[str, Any], **changes: Any) -> str:
    return orjson.dumps({**info, **changes}).decode()


MALFORMED_SCRIPTS: list[Any] = [
    [["c"]],
    [None],
    5,
    [["c", -1]],
    [["c", "1"]],
    [["c", True]],
    [["x", 1]],
    [["b", 0, 10]],
    [["b", 0, 10, 7]],
    [["b", 0, -1, "0" * 64]],
    [["b", 0, 10, "../../../../../../../../dev/zero"]],
    [["b", 0, 10, "ab/../../" + "0" * 55]],
    [["b", 0, 10, "A" * 64]],
    [["p", [[0, 1]], 1, "0" * 64]],
    [[]],
    "[]",
    {"c": 1},
]


def _blob_dir(out: ReducedRow, root: Path) -> BlobReader:
    BlobWriter(str(root)).put_many(out.blobs)
    return BlobReader(str(root))


@pytest.mark.parametrize("script", MALFORMED_SCRIPTS, ids=repr)
def test_a_malformed_script_is_a_restore_error(script: Any, tmp_path: Path) -> None:
    out = reduce_row(_chat(2, "u" * 4000), TIGHT)
    fetch = _blob_dir(out, tmp_path / "blobs")
    with pytest.raises(RestoreError, match="^<row>: the ctx_restore value is not one ctx wrote"):
        restore_row(out.value, _with(_restore_of(out), script=script), fetch)


def test_a_digest_never_names_a_file_outside_the_blobs(tmp_path: Path) -> None:
    # "blob altered" (the file exists) against "blob missing" told what exists anywhere.
    out = reduce_row(_chat(2, "u" * 4000), TIGHT)
    fetch = _blob_dir(out, tmp_path / "blobs")
    (tmp_path / "secret").write_bytes(b"x" * 10)
    info = _restore_of(out)
    for digest in ("../secret", "../../secret", "../" * 12 + "dev/zero"):
        script = [["b", 0, 10, digest]]
        with pytest.raises(RestoreError, match="not one ctx wrote") as err:
            restore_row(out.value, _with(info, script=script), fetch)
        assert "altered" not in str(err.value) and "missing" not in str(err.value)


def test_a_blob_longer_than_declared_is_not_read_whole(tmp_path: Path) -> None:
    out = reduce_row(_chat(2, "u" * 4000), TIGHT)
    fetch = _blob_dir(out, tmp_path / "blobs")
    info = _restore_of(out)
    op = next(op for op in info["script"] if op[0] == "b")
    # A FIFO where the blob should be: reading it would wait forever.
    path = tmp_path / "blobs" / blob_path(op[3])
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(RestoreError, match="missing"):
        restore_row(out.value, out.restore, fetch)
    path.unlink()
    path.write_bytes(b"z" * (op[2] * 1000))
    with pytest.raises(RestoreError, match="altered"):
        restore_row(out.value, out.restore, fetch)


FIELDS = ("v", "kind", "units", "script", "input", "output")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**12) | st.text(max_size=70),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    field=st.sampled_from(FIELDS),
    value=JSON,
    op_at=st.integers(0, 5),
    op=st.lists(JSON, max_size=5),
    drop=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_every_malformed_entry_is_a_restore_error(
    field: str, value: Any, op_at: int, op: list[Any], drop: bool
) -> None:
    out = _PROPERTY_ROW
    info = _restore_of(out)
    if drop:
        del info[field]
    elif field == "script" and isinstance(info["script"], list):
        script = list(info["script"])
        script.insert(min(op_at, len(script)), op)
        info["script"] = script
    else:
        info[field] = value
    try:
        back = restore_row(out.value, orjson.dumps(info).decode(), out.blobs)
    except RestoreError:
        return
    assert back == _PROPERTY_VALUE  # a change that keeps its meaning (an empty copy)


_PROPERTY_VALUE = _chat(2, "u" * 4000)
_PROPERTY_ROW = reduce_row(_PROPERTY_VALUE, TIGHT)


def test_a_value_of_the_wrong_kind_is_a_restore_error() -> None:
    out = reduce_row(_chat(2, "u" * 4000), TIGHT)
    for value in (42, None, {"no": "messages"}, []):
        with pytest.raises(RestoreError):
            restore_row(value, out.restore, out.blobs)
