"""Anthropic Messages JSONL: detection before OpenAI chat, block-level round trips."""

from __future__ import annotations

import json
from pathlib import Path

from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats import load
from support.format_golden import (
    FIXTURES,
    assert_identity,
    config,
    dump_and_restore,
    golden_roundtrip,
    lines,
)

SRC = FIXTURES / "anthropic" / "messages.jsonl"
RAW = SRC.read_bytes()


def test_sniff_prefers_anthropic_over_openai_chat() -> None:
    assert load(RAW).format.name == "anthropic"
    plain = b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n'
    assert load(plain).format.name == "openai_chat"
    text_parts = b'{"role": "user", "content": [{"type": "text", "text": "hi"}]}\n'
    assert load(text_parts).format.name == "openai_chat"
    image = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    with_image = json.dumps({"role": "user", "content": [image]}).encode() + b"\n"
    assert load(with_image).format.name == "anthropic"
    oai_tools = (FIXTURES / "json_doc" / "array.json").read_bytes()
    as_lines = b"".join(json.dumps(m).encode() + b"\n" for m in json.loads(oai_tools))
    assert load(as_lines).format.name == "openai_chat"


def test_load_dump_without_stage_is_identity() -> None:
    assert_identity(RAW)


def test_blocks_and_parallel_results() -> None:
    conv = load(RAW).conversation
    kinds = [[b.kind for b in m.blocks] for m in conv]
    assert kinds[1] == [Kind.THINKING, Kind.TEXT, Kind.TOOL_CALL, Kind.TOOL_CALL]
    assert kinds[2] == [Kind.TOOL_RESULT, Kind.TOOL_RESULT]
    assert kinds[3] == [Kind.THINKING, Kind.TOOL_CALL]
    assert kinds[4] == [Kind.TOOL_RESULT, Kind.TEXT, Kind.IMAGE]
    call = conv.messages[1].blocks[2]
    assert json.loads(call.text) == {"command": "ls -l src/app"} and call.name == "bash"
    for ref, _ in conv.iter_blocks(Kind.TOOL_RESULT):
        assert conv.call_of(ref) is not None
    # A result made of two text blocks reads as one text.
    assert conv.messages[2].blocks[1].text.count("processed batch") == 30


def test_truncation_changes_only_the_long_results(tmp_path: Path) -> None:
    out = golden_roundtrip(SRC, "anthropic", tmp_path)
    before, after = lines(RAW), lines(out)
    assert [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a != b] == [2, 4]
    a, b = after[2]["content"]
    assert a["tool_use_id"] == "toolu_A" and "[ctx: output truncated" in a["content"]
    # A list of text blocks that changed is written back as one string.
    assert isinstance(b["content"], str) and "[ctx: output truncated" in b["content"]
    shot, text, image = after[4]["content"]
    # Non-text parts of a result stay, after the new text.
    assert (
        shot["content"][0]["type"] == "text"
        and "[ctx: output truncated" in shot["content"][0]["text"]
    )
    assert shot["content"][1] == before[4]["content"][0]["content"][1]
    assert text == before[4]["content"][1] and image == before[4]["content"][2]
    # Unchanged lines keep their exact bytes (the file's ", " / ": " style included).
    raw_lines, out_lines = RAW.splitlines(), out.splitlines()
    assert out_lines[1] == raw_lines[1] and out_lines[3] == raw_lines[3]
    assert out_lines[2].startswith(b'{"role": "user", "content": [{"type": "tool_result", ')


def test_cleared_arguments_stay_an_object(tmp_path: Path) -> None:
    records = lines(RAW)
    long_command = "find src -name '*.py' -newer config.toml -exec grep -l retry_count {} +"
    records[1]["content"][2]["input"] = {"command": long_command, "timeout": 120}
    src = tmp_path / "long_args.jsonl"
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    cfg = config(
        {"use": "clear_tool_results", "max_tokens": 0, "keep_rounds": 1, "clear_arguments": True}
    )
    out = golden_roundtrip(src, "anthropic", tmp_path, cfg)
    after = lines(out)
    call = after[1]["content"][2]
    assert call["type"] == "tool_use" and call["id"] == "toolu_A"
    assert set(call["input"]) == {"ctx_cleared"}
    assert call["input"]["ctx_cleared"].startswith("[ctx: arguments cleared")
    assert after[2]["content"][0]["content"].startswith("[ctx cleared: ")
    # The thinking block of the same turn is untouched.
    assert after[1]["content"][0] == records[1]["content"][0]


def test_removing_a_call_and_its_result(tmp_path: Path) -> None:
    doc = load(RAW)
    msgs = list(doc.conversation.messages)
    msgs[3] = msgs[3].with_blocks([b for b in msgs[3].blocks if b.kind is not Kind.TOOL_CALL])
    msgs[4] = msgs[4].with_blocks([b for b in msgs[4].blocks if b.kind is not Kind.TOOL_RESULT])
    out = dump_and_restore(doc, doc.conversation.with_messages(msgs), tmp_path)
    after = lines(out)
    assert [b["type"] for b in after[3]["content"]] == ["redacted_thinking"]
    assert [b["type"] for b in after[4]["content"]] == ["text", "image"]


def test_new_messages_and_emptied_turns(tmp_path: Path) -> None:
    doc = load(RAW)
    msgs = list(doc.conversation.messages)
    note = Message("user", (Block(Kind.TEXT, "Keep going."),))
    answer = msgs[5].with_blocks([])
    out = dump_and_restore(doc, doc.conversation.with_messages([*msgs[:5], note, answer]), tmp_path)
    after = lines(out)
    assert after[-1] == {"role": "user", "content": "Keep going."}
    assert len(after) == len(lines(RAW))


def test_api_responses_are_anthropic_too(tmp_path: Path) -> None:
    records = lines(RAW)
    for i, rec in enumerate(records):
        if rec["role"] == "assistant":
            records[i] = {"id": f"msg_{i}", "type": "message", **rec, "stop_reason": "tool_use"}
    src = tmp_path / "responses.jsonl"
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    assert load(src.read_bytes()).format.name == "anthropic"
    golden_roundtrip(src, "anthropic", tmp_path)
