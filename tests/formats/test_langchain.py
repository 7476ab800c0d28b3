"""LangChain dumps (constructor and messages_to_dict): round trips, duplicate calls in sync."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats import load
from ctxcli.formats.langchain import LangChain
from support.format_golden import (
    FIXTURES,
    assert_identity,
    config,
    dump_and_restore,
    golden_roundtrip,
    lines,
)

CONSTRUCTOR = FIXTURES / "langchain" / "constructor.jsonl"
DICTS = FIXTURES / "langchain" / "messages_to_dict.jsonl"
BOTH = [CONSTRUCTOR, DICTS]
CLEAR_ALL = config(
    {"use": "clear_tool_results", "max_tokens": 0, "keep_rounds": 0, "clear_arguments": True}
)


def fields(record: dict[str, Any]) -> dict[str, Any]:
    """The message fields of either dump shape."""
    inner = record.get("kwargs", record.get("data"))
    assert isinstance(inner, dict)
    return inner


@pytest.mark.parametrize("src", BOTH, ids=lambda p: p.stem)
def test_sniff_and_identity(src: Path) -> None:
    raw = src.read_bytes()
    assert load(raw).format.name == "langchain"
    assert_identity(raw)


def test_sniff_rejects_other_formats() -> None:
    fmt = LangChain()
    assert not fmt.sniff([{"role": "user", "content": "hi"}])
    assert not fmt.sniff(lines((FIXTURES / "codex" / "rollout.jsonl").read_bytes()))


@pytest.mark.parametrize("src", BOTH, ids=lambda p: p.stem)
def test_messages_and_links(src: Path) -> None:
    conv = load(src.read_bytes()).conversation
    calls = [b for _, b in conv.iter_blocks(Kind.TOOL_CALL)]
    # Each call is shown once although the record stores it two or three times.
    assert [c.name for c in calls] == ["ls", "sql"]
    assert json.loads(calls[0].text) == {"path": "src/app"}
    for ref, _ in conv.iter_blocks(Kind.TOOL_RESULT):
        assert conv.call_of(ref) is not None
    assert conv.messages[-1].role == "assistant" and conv.messages[-1].text.startswith("Modules")


@pytest.mark.parametrize("src", BOTH, ids=lambda p: p.stem)
def test_truncation_changes_tool_messages_only(src: Path, tmp_path: Path) -> None:
    raw = src.read_bytes()
    out = golden_roundtrip(src, "langchain", tmp_path)
    before, after = lines(raw), lines(out)
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a != b]
    assert all(fields(before[i])["type"] == "tool" for i in changed) and len(changed) == 2
    for i in changed:
        content = fields(after[i])["content"]
        # A list content that changed is written back as a string.
        assert isinstance(content, str) and "[ctx: output truncated" in content
        rest = {k: v for k, v in fields(after[i]).items() if k != "content"}
        assert rest == {k: v for k, v in fields(before[i]).items() if k != "content"}


@pytest.mark.parametrize("src", BOTH, ids=lambda p: p.stem)
def test_cleared_arguments_update_every_copy_of_the_call(src: Path, tmp_path: Path) -> None:
    out = golden_roundtrip(src, "langchain", tmp_path, CLEAR_ALL)
    ai = next(fields(r) for r in lines(out) if fields(r).get("tool_calls"))
    sql = ai["tool_calls"][1]
    assert set(sql["args"]) == {"ctx_cleared"}
    assert ai["tool_calls"][0]["args"] == {"path": "src/app"}  # short: kept
    raw_calls = ai.get("additional_kwargs", {}).get("tool_calls")
    if raw_calls:
        assert json.loads(raw_calls[1]["function"]["arguments"]) == sql["args"]
        # Written like the original arguments string (json.dumps style, ", " / ": ").
        assert raw_calls[1]["function"]["arguments"].startswith('{"ctx_cleared": ')
    uses = [p for p in ai["content"] if isinstance(p, dict) and p.get("type") == "tool_use"]
    if uses:
        assert uses[1]["input"] == sql["args"] and uses[0]["input"] == {"path": "src/app"}
    assert raw_calls or uses


@pytest.mark.parametrize("src", BOTH, ids=lambda p: p.stem)
def test_removing_a_call_removes_its_copies(src: Path, tmp_path: Path) -> None:
    doc = load(src.read_bytes())
    msgs: list[Message] = []
    for m in doc.conversation:
        blocks = [b for b in m.blocks if b.call_id not in ("call_2", "toolu_2")]
        if blocks or not m.blocks:
            msgs.append(m.with_blocks(blocks))
    out = dump_and_restore(doc, doc.conversation.with_messages(msgs), tmp_path)
    assert b"call_2" not in out and b"toolu_2" not in out
    ai = next(fields(r) for r in lines(out) if fields(r).get("tool_calls"))
    assert [c["id"] for c in ai["tool_calls"]] in (["call_1"], ["toolu_1"])


def test_old_dump_with_calls_in_additional_kwargs_only(tmp_path: Path) -> None:
    records = lines(CONSTRUCTOR.read_bytes())
    del fields(records[2])["tool_calls"]
    src = tmp_path / "old.jsonl"
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    conv = load(src.read_bytes()).conversation
    assert [b.name for _, b in conv.iter_blocks(Kind.TOOL_CALL)] == ["ls", "sql"]
    out = golden_roundtrip(src, "langchain", tmp_path, CLEAR_ALL)
    ai = fields(lines(out)[2])
    args = json.loads(ai["additional_kwargs"]["tool_calls"][1]["function"]["arguments"])
    assert set(args) == {"ctx_cleared"}


@pytest.mark.parametrize("src", BOTH, ids=lambda p: p.stem)
def test_new_message_in_the_file_shape(src: Path, tmp_path: Path) -> None:
    doc = load(src.read_bytes())
    note = Message("user", (Block(Kind.TEXT, "Summary so far."),))
    out = dump_and_restore(
        doc, doc.conversation.with_messages([*doc.conversation.messages, note]), tmp_path
    )
    last = lines(out)[-1]
    assert fields(last)["content"] == "Summary so far."
    if "lc" in last:
        assert last["id"][-1] == "HumanMessage"
    else:
        assert last["type"] == "human"


def test_forcing_langchain_on_another_format_is_an_error() -> None:
    other = (FIXTURES / "codex" / "rollout.jsonl").read_bytes()
    with pytest.raises(TranscriptError, match=r"^x\.jsonl:1: no record is a LangChain message"):
        load(other, "x.jsonl", format="langchain")
