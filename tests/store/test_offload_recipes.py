"""The restore pack keeps no second copy of offloaded texts (issue 22).

A changed record whose original holds an offloaded text as a JSON string is packed as a
recipe: the bytes around the string, plus a reference to the file. These tests check
that such records restore byte for byte, that a string escaped any other way stays in
the pack, that a damaged reference is named, and that manifests written before recipes
existed still restore.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli.api import Destination, reduce, reduce_file, restore_file
from ctxcli.core.errors import RestoreError
from ctxcli.core.protocols import sha256
from ctxcli.formats.jsontext import dumps_like
from ctxcli.pipeline.config import build_config
from ctxcli.store.disk import OffloadStore
from ctxcli.store.manifest import MANIFEST, PACK, Header, InputSide, Side
from ctxcli.store.restore import ASCII, NESTED, escape_text, restore_bytes
from support.paths import FIXTURES

CONFIG = build_config(
    {"tokenizer": "approx", "stages": [{"use": "truncate_tool_output", "max_chars": 300}]},
    "recipe tests",
)
OUTPUT = "".join(f'tests/test_cache.py::test_{i} PASSED "ok" café\tdone\n' for i in range(60))


def _lines(tool_output: str, dumps: Any) -> bytes:
    records: list[dict[str, Any]] = [
        {"role": "user", "content": "Why does the cache test fail?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": tool_output},
        {"role": "assistant", "content": "The expiry is off by one."},
    ]
    return b"".join(dumps(r) + b"\n" for r in records)


def _reduce(raw: bytes, name: str = "t.jsonl") -> tuple[Path, dict[str, Any]]:
    Path(name).write_bytes(raw)
    reduce_file(name, f"out-{name}", config=CONFIG)
    offload = Path(f"out-{name}.offload")
    return offload, orjson.loads((offload / MANIFEST).read_bytes())


def _ops(manifest: dict[str, Any], kind: str) -> list[list[Any]]:
    return [op for op in manifest["script"] if op[0] == kind]


def _restores(name: str = "t.jsonl") -> bytes:
    return restore_file(f"out-{name}")


def test_an_offloaded_text_is_referenced_not_packed_and_restores_exactly() -> None:
    raw = _lines(OUTPUT, orjson.dumps)
    offload, manifest = _reduce(raw)
    (recipe,) = _ops(manifest, "p")
    assert ["trunc/call_1"] in recipe[1]
    assert not _ops(manifest, "b")
    # The pack holds the record's other bytes only, not the 3 KB of tool output.
    assert manifest["pack"]["bytes"] == len(raw.splitlines(keepends=True)[2]) - len(
        orjson.dumps(OUTPUT)
    )
    assert (offload / PACK).stat().st_size == manifest["pack"]["bytes"]
    assert _restores() == raw


def test_python_json_ascii_escaping_is_referenced_with_its_style() -> None:
    # tau-bench style: json.dumps with its default ensure_ascii (é -> \u00e9) and spaces.
    raw = _lines(OUTPUT, lambda r: json.dumps(r).encode())
    assert b"caf\\u00e9" in raw
    _offload, manifest = _reduce(raw)
    (recipe,) = _ops(manifest, "p")
    assert ["trunc/call_1", "ascii"] in recipe[1]
    assert _restores() == raw


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("slash.jsonl", OUTPUT.replace("/", "\\/")),  # \/ is valid JSON; no dumps writes it
        ("upper.jsonl", OUTPUT.replace("é", "\\u00E9")),  # upper-case hex
        ("mixed.jsonl", OUTPUT.replace("é", "\\u00e9", 1)),  # one escaped, the rest UTF-8
    ],
)
def test_an_escaping_no_dumps_reproduces_stays_in_the_pack(name: str, escaped: str) -> None:
    plain = _lines("@@OUTPUT@@", orjson.dumps)
    literal = orjson.dumps(escaped).replace(b"\\\\", b"\\")  # the escapes as written above
    raw = plain.replace(b'"@@OUTPUT@@"', literal)
    assert json.loads(raw.splitlines()[2])["content"] == OUTPUT  # the same text, other bytes
    _offload, manifest = _reduce(raw, name)
    assert not _ops(manifest, "p")
    assert len(_ops(manifest, "b")) == 1
    assert _restores(name) == raw


def test_a_text_held_twice_is_referenced_twice() -> None:
    raw = _lines(OUTPUT, orjson.dumps)
    line = orjson.loads(raw.splitlines()[2])
    line["metadata"] = {"copy": OUTPUT}  # Claude Code keeps a second copy (toolUseResult)
    raw = raw.replace(raw.splitlines(keepends=True)[2], orjson.dumps(line) + b"\n")
    _offload, manifest = _reduce(raw)
    (recipe,) = _ops(manifest, "p")
    assert recipe[1].count(["trunc/call_1"]) == 2
    assert _restores() == raw


def test_an_altered_referenced_file_is_named() -> None:
    offload, _manifest = _reduce(_lines(OUTPUT, orjson.dumps))
    target = offload / "trunc" / "call_1"
    target.write_text(OUTPUT.upper())
    with pytest.raises(RestoreError, match=r"trunc/call_1 was altered"):
        _restores()


def test_a_missing_referenced_file_is_named() -> None:
    offload, _manifest = _reduce(_lines(OUTPUT, orjson.dumps))
    (offload / "trunc" / "call_1").unlink()
    with pytest.raises(RestoreError, match=r"trunc/call_1 is missing"):
        _restores()


def test_a_reference_to_an_unlisted_file_is_a_damaged_manifest() -> None:
    offload, manifest = _reduce(_lines(OUTPUT, orjson.dumps))
    shutil.copy(offload / "trunc" / "call_1", offload / "trunc" / "stray")
    for op in _ops(manifest, "p"):
        op[1] = [["trunc/stray"] if piece == ["trunc/call_1"] else piece for piece in op[1]]
    (offload / MANIFEST).write_bytes(orjson.dumps(manifest))
    with pytest.raises(RestoreError, match=r"damaged: a record is rebuilt from trunc/stray"):
        _restores()


def test_a_reference_outside_the_directory_is_refused() -> None:
    offload, manifest = _reduce(_lines(OUTPUT, orjson.dumps))
    for op in _ops(manifest, "p"):
        op[1] = [["../t.jsonl"] if piece == ["trunc/call_1"] else piece for piece in op[1]]
    (offload / MANIFEST).write_bytes(orjson.dumps(manifest))
    with pytest.raises(RestoreError, match=r"is damaged: script"):
        _restores()


def test_a_manifest_with_only_literal_records_still_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written by ctx before recipes existed (``ctx reduce input.jsonl -o reduced.jsonl
    # --offload-dir reduced.offload``, truncate_tool_output at 300): the whole changed
    # record is in originals.bin.
    old = tmp_path / "v1"
    shutil.copytree(FIXTURES / "offload_v1", old)
    manifest = orjson.loads((old / "reduced.offload" / MANIFEST).read_bytes())
    assert {op[0] for op in manifest["script"]} == {"c", "s", "b"}
    original = (old / "input.jsonl").read_bytes()
    assert restore_file(old / "reduced.jsonl", offload_dir=old / "reduced.offload") == original
    # The same run now packs a recipe instead: the same output, restored the same.
    new = tmp_path / "now"
    new.mkdir()
    monkeypatch.chdir(new)
    Path("input.jsonl").write_bytes(original)
    # That run's hints cited the relative path it was given (they cite absolute ones now).
    where = Destination("reduced.jsonl", "reduced.offload", cite_as="reduced.offload")
    reduce("input.jsonl", where, config=CONFIG)
    assert Path("reduced.jsonl").read_bytes() == (old / "reduced.jsonl").read_bytes()
    manifest = orjson.loads(Path("reduced.offload", MANIFEST).read_bytes())
    assert {op[0] for op in manifest["script"]} == {"c", "s", "p"}
    assert restore_file("reduced.jsonl") == original


def test_a_text_with_a_lone_surrogate_is_never_referenced(tmp_path: Path) -> None:
    # Its file holds U+FFFD instead (agent_text): re-escaping it would not give the original.
    text = "x" * 100 + "\ud800" + "y" * 100
    record = b'{"content":"' + b"x" * 100 + b"\\ud800" + b"y" * 100 + b'"}\n'
    store = OffloadStore(tmp_path / "off", "off")
    store.put("trunc", "c1", text)
    op = store.add_original(record, [text])
    assert op[0] == "b"
    output = b"{}\n"
    store.commit(*_manifest(record, output, [op, ["s", 1]]))
    assert restore_bytes(output, tmp_path / "off") == record


def test_short_and_foreign_texts_stay_in_the_pack(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "off", "off")
    short, long_ = "a short text", "z" * 500
    store.put("trunc", "c1", short)
    record = orjson.dumps({"a": short, "b": long_}) + b"\n"
    # The short text is below the threshold; the long one was never offloaded.
    assert store.add_original(record, [short, long_])[0] == "b"
    store.abort()


def test_the_store_does_not_keep_the_texts_it_wrote() -> None:
    # A text a stage wrote (a truncation preview that clear_tool_results offloads again)
    # stayed alive until commit when the recipes' map was keyed by the text itself.
    preview = "".join(f"line {i}\n" for i in range(40))
    before = sys.getrefcount(preview)
    store = OffloadStore(Path("off"), "off")
    store.put("clear", "1", preview)
    assert sys.getrefcount(preview) == before
    record = orjson.dumps({"role": "tool", "content": preview}) + b"\n"
    assert store.add_original(record, [preview])[0] == "p"  # still a recipe
    store.abort()


# orjson stores the UTF-8 of a non-ASCII str it writes inside the str (sys.getsizeof
# shows it), and the input's texts live until the run ends: the recipes and the dump
# must not leave that second copy on them.


@pytest.mark.parametrize("style", ["", ASCII, NESTED])
def test_escaping_a_text_leaves_no_utf8_copy_inside_it(style: str) -> None:
    text = "".join(["café au lait "] * 200)  # a new str (a constant would be shared)
    size = sys.getsizeof(text)
    literal = escape_text(text, style)
    if style == NESTED:  # the literal as it sits inside another JSON string
        literal = json.loads(b'"' + literal + b'"').encode()
    assert json.loads(literal) == text
    assert sys.getsizeof(text) == size


def test_writing_a_changed_record_leaves_no_utf8_copy_inside_its_old_text() -> None:
    old = "".join(["résumé "] * 200)
    original = {"role": "tool", "tool_call_id": "c1", "content": old}
    # Written as orjson writes it, without orjson touching ``old`` before the check.
    raw = json.dumps(original, ensure_ascii=False, separators=(",", ":")).encode()
    size = sys.getsizeof(old)
    new = {**original, "content": "[ctx cleared]"}
    assert dumps_like(new, raw, original) == orjson.dumps(new)
    assert sys.getsizeof(old) == size


def test_recipe_pieces_cover_the_record(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "off", "off")
    first, second = "first " * 20, "second " * 20
    store.put("clear", "c1", first)
    store.put("clear", "c2", second)
    # The record starts with one reference and ends with the other: no empty pieces.
    record = orjson.dumps([first, 1, second])[1:-1]
    op = store.add_original(record, [second, first, second])
    assert op == [
        "p",
        [["clear/c1"], [0, 3], ["clear/c2"]],
        len(record),
        sha256(record),
    ]
    output = b"[]"
    store.commit(*_manifest(record, output, [op, ["s", 1]], "document"))
    assert restore_bytes(output, tmp_path / "off") == record


def test_a_json_string_inside_a_json_string_is_referenced(tmp_path: Path) -> None:
    # Codex: a function_call_output's "output" is the JSON text of {"output": ..., ...}.
    store = OffloadStore(tmp_path / "off", "off")
    store.put("trunc", "c1", OUTPUT)
    inner = orjson.dumps({"output": OUTPUT, "metadata": {"exit_code": 0}}).decode()
    record = orjson.dumps({"type": "function_call_output", "output": inner}) + b"\n"
    op = store.add_original(record, [OUTPUT])
    assert op[0] == "p"
    assert ["trunc/c1", "nested"] in op[1]
    output = b"{}\n"
    store.commit(*_manifest(record, output, [op, ["s", 1]]))
    assert restore_bytes(output, tmp_path / "off") == record


def _manifest(
    original: bytes, output: bytes, script: list[Any], units: str = "lines"
) -> tuple[Header, list[Any]]:
    header = Header.new(
        format="openai_chat",
        units=units,
        input=InputSide(name="t", sha256=sha256(original), bytes=len(original)),
        output=Side(sha256=sha256(output), bytes=len(output)),
    )
    return header, script
