"""JSON documents holding a message list: arrays, mini-swe-agent and SWE-agent trajectories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats import get_format, load
from ctxcli.store.naming import Preview
from support.format_golden import FIXTURES, assert_identity, dump_and_restore, golden_roundtrip

ARRAY = FIXTURES / "json_doc" / "array.json"
MINI = FIXTURES / "json_doc" / "minisweagent.traj.json"
SWE = FIXTURES / "json_doc" / "sweagent.traj"
ALL = [ARRAY, MINI, SWE]
# How each fixture was written: json.dumps(indent, ensure_ascii) and a final newline.
STYLE = {ARRAY: (4, False, "\n"), MINI: (2, True, ""), SWE: (2, False, "")}


def messages(doc: Any) -> list[dict[str, Any]]:
    listed = doc if isinstance(doc, list) else doc.get("messages", doc.get("history"))
    assert isinstance(listed, list)
    return listed


@pytest.mark.parametrize("src", ALL, ids=lambda p: p.name)
def test_detected_as_a_document(src: Path) -> None:
    doc = load(src.read_bytes(), str(src))
    assert doc.format.name == "json_doc"
    assert len(doc.records) == len(messages(json.loads(src.read_bytes())))
    # Each message is a unit whose line is where its object starts.
    text = src.read_bytes().splitlines()
    for rec in doc.records:
        assert text[rec.line - 1].strip() == b"{"
        assert text[rec.line].strip().startswith(b'"' + next(iter(rec.data)).encode())


def test_jsonl_and_other_json_are_not_documents() -> None:
    fmt = get_format("json_doc")
    jsonl = (FIXTURES / "anthropic" / "messages.jsonl").read_bytes()
    assert fmt.try_load_document(jsonl, "x") is None  # type: ignore[attr-defined]
    assert load(jsonl).format.name == "anthropic"
    runs = json.dumps([{"task_id": 1, "traj": []}], indent=2).encode()
    assert fmt.try_load_document(runs, "x") is None  # type: ignore[attr-defined]
    with pytest.raises(TranscriptError):
        load(runs, "runs.json")
    with pytest.raises(TranscriptError, match="runs.json: not a JSON document"):
        load(runs, "runs.json", format="json_doc")
    one_line = b'[{"role": "user", "content": "hi"}]'
    assert load(one_line).format.name == "json_doc"


@pytest.mark.parametrize("src", ALL, ids=lambda p: p.name)
def test_load_dump_without_stage_is_identity(src: Path) -> None:
    doc = assert_identity(src.read_bytes())
    _, script = doc.format.dump(doc, doc.conversation, Preview("offload"))
    assert script.ops == [["c", 1]]


@pytest.mark.parametrize("src", ALL, ids=lambda p: p.name)
def test_truncation_changes_only_the_message_list(src: Path, tmp_path: Path) -> None:
    raw = src.read_bytes()
    out = golden_roundtrip(src, "json_doc", tmp_path)
    manifest = json.loads((tmp_path / "off" / "manifest.json").read_bytes())
    assert manifest["units"] == "document"
    assert manifest["script"][-1] == ["s", 1]
    before, after = json.loads(raw), json.loads(out)
    if isinstance(before, dict):
        assert {k: v for k, v in after.items() if k not in ("messages", "history")} == {
            k: v for k, v in before.items() if k not in ("messages", "history")
        }
    old, new = messages(before), messages(after)
    changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    assert changed and all(old[i]["role"] == "tool" for i in changed)
    for i in changed:
        assert "[ctx: output truncated" in new[i]["content"]
    # Written in the document's own style: as if its producer had written it.
    indent, ensure_ascii, end = STYLE[src]
    assert out == (json.dumps(after, indent=indent, ensure_ascii=ensure_ascii) + end).encode()


def test_minisweagent_quirks(tmp_path: Path) -> None:
    conv = load(MINI.read_bytes()).conversation
    # The exit message is not sent to the model; the final call then needs no result.
    assert [m.role for m in conv][-1] == "assistant"
    out = golden_roundtrip(MINI, "json_doc", tmp_path)
    new = json.loads(out)["messages"]
    tool = next(m for m in new if m["role"] == "tool")
    assert "raw_output" not in tool["extra"] and tool["extra"]["returncode"] == 0
    assert new[-1]["role"] == "exit"


def test_sweagent_tool_call_ids_list(tmp_path: Path) -> None:
    conv = load(SWE.read_bytes()).conversation
    results = list(conv.iter_blocks(Kind.TOOL_RESULT))
    assert [b.call_id for _, b in results] == ["call_x1", "call_x2"]
    assert all(conv.call_of(ref) is not None for ref, _ in results)
    out = golden_roundtrip(SWE, "json_doc", tmp_path)
    tool = json.loads(out)["history"][3]
    assert tool["tool_call_ids"] == ["call_x1"] and tool["message_type"] == "observation"


def test_several_ids_on_one_observation() -> None:
    doc = json.loads(SWE.read_bytes())
    doc["history"][2]["tool_calls"].append(doc["history"][4]["tool_calls"][0])
    doc["history"][3]["tool_call_ids"].append("call_x2")
    del doc["history"][4:]
    conv = load(json.dumps(doc, indent=2).encode()).conversation
    results = [b.call_id for _, b in conv.iter_blocks(Kind.TOOL_RESULT)]
    assert results == ["call_x1", "call_x2"]
    assert all(conv.results_of(ref) for ref, _ in conv.iter_blocks(Kind.TOOL_CALL))


def test_drops_and_inserts_keep_the_layout(tmp_path: Path) -> None:
    doc = load(ARRAY.read_bytes())
    msgs = list(doc.conversation.messages)
    note = Message("user", (Block(Kind.TEXT, "Summary: two reads, all fine."),))
    conv = doc.conversation.with_messages([msgs[0], note, msgs[-1]])
    out = dump_and_restore(doc, conv, tmp_path)
    after = json.loads(out)
    assert [m["role"] for m in after] == ["system", "user", "assistant"]
    assert after[1] == {"role": "user", "content": "Summary: two reads, all fine."}
    assert out == (json.dumps(after, indent=4, ensure_ascii=False) + "\n").encode()
    empty = dump_and_restore(doc, doc.conversation.with_messages([]), tmp_path / "empty")
    assert empty == b"[]\n"


def test_compact_document_stays_compact(tmp_path: Path) -> None:
    raw = json.dumps(
        {"messages": json.loads(ARRAY.read_bytes()), "meta": {"n": 1}}, ensure_ascii=False
    ).encode()
    src = tmp_path / "compact.json"
    src.write_bytes(raw)
    out = golden_roundtrip(src, "json_doc", tmp_path / "run")
    assert b"\n" not in out
    assert out == json.dumps(json.loads(out), ensure_ascii=False).encode()


def test_windows_line_endings_are_kept(tmp_path: Path) -> None:
    src = tmp_path / "crlf.json"
    src.write_bytes(ARRAY.read_bytes().replace(b"\n", b"\r\n"))
    out = golden_roundtrip(src, "json_doc", tmp_path / "run")
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert (
        out
        == (json.dumps(json.loads(out), indent=4, ensure_ascii=False) + "\n")
        .replace("\n", "\r\n")
        .encode()
    )
