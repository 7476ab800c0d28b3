"""Codex CLI rollouts: detection, lossless round trips, JSON-encoded outputs, envelope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats import load
from ctxcli.formats.codex import Codex
from support.format_golden import (
    FIXTURES,
    assert_identity,
    dump_and_restore,
    golden_roundtrip,
    lines,
)

SRC = FIXTURES / "codex" / "rollout.jsonl"
RAW = SRC.read_bytes()


def payload_of(rec: dict[str, object]) -> dict[str, object]:
    payload = rec["payload"]
    assert isinstance(payload, dict)
    return payload


def test_sniff_detects_codex() -> None:
    assert load(RAW).format.name == "codex"
    assert not Codex().sniff(lines((FIXTURES / "claude_code" / "session.jsonl").read_bytes()))
    assert not Codex().sniff([{"role": "user", "content": "hi"}])


def test_legacy_rollout_without_envelope() -> None:
    header = {"id": "s-1", "timestamp": "2025-05-01T10:00:00Z", "instructions": None}
    items = [payload_of(r) for r in lines(RAW) if r["type"] == "response_item"]
    raw = "".join(json.dumps(r) + "\n" for r in [header, *items]).encode()
    doc = load(raw)
    assert doc.format.name == "codex"
    assert len(doc.conversation) == 11


def test_load_dump_without_stage_is_identity() -> None:
    assert_identity(RAW)


def test_messages_come_from_response_items_only() -> None:
    conv = load(RAW).conversation
    # event_msg duplicates, turn_context and session_meta are not messages.
    assert len(conv) == sum(1 for r in lines(RAW) if r["type"] == "response_item")
    assert [m.role for m in conv][:3] == ["system", "user", "user"]
    reasoning = conv.messages[3]
    assert [b.kind for b in reasoning.blocks] == [Kind.THINKING]
    calls = list(conv.iter_blocks(Kind.TOOL_CALL))
    assert [b.name for _, b in calls] == ["shell", "shell", "apply_patch"]
    assert json.loads(calls[0][1].text)["command"][-1] == "ls -l src/app"
    results = list(conv.iter_blocks(Kind.TOOL_RESULT))
    # The JSON-encoded output is shown as its inner text.
    assert results[0][1].text.startswith("-rw-r--r--")
    assert results[2][1].text.startswith("Success. Updated")
    for ref, _ in results:
        assert conv.call_of(ref) is not None


def test_parallel_calls_of_one_response_form_one_round() -> None:
    conv = load(RAW).conversation
    rounds = conv.rounds()
    first = rounds[0]
    assert [conv.messages[i].blocks[0].kind for i in first.assistant] == [
        Kind.THINKING,
        Kind.TOOL_CALL,
        Kind.TOOL_CALL,
    ]
    assert len(first.results) == 2
    assert len(rounds) == 3


def test_truncation_rewrites_outputs_in_their_own_encoding(tmp_path: Path) -> None:
    out = golden_roundtrip(SRC, "codex", tmp_path)
    before, after = lines(RAW), lines(out)
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a != b]
    assert [payload_of(before[i])["call_id"] for i in changed] == ["call_A", "call_B", "call_C"]
    for i in changed:
        old, new = payload_of(before[i]), payload_of(after[i])
        assert {k: v for k, v in new.items() if k != "output"} == {
            k: v for k, v in old.items() if k != "output"
        }
    encoded = payload_of(after[changed[0]])["output"]
    assert isinstance(encoded, str) and encoded.startswith('{"output":"')
    inner = json.loads(encoded)
    assert inner["metadata"] == {"exit_code": 0, "duration_seconds": 0.1}
    assert "[ctx: output truncated" in inner["output"] and len(inner["output"]) <= 256
    plain = payload_of(after[changed[1]])["output"]
    assert isinstance(plain, str) and plain.startswith("Exit code: 0\n")
    patch = json.loads(str(payload_of(after[changed[2]])["output"]))
    assert patch["output"].startswith("Success.") and "[ctx: output truncated" in patch["output"]
    # Reasoning and its ciphertext are never touched.
    assert out.count(b"gAAAAABo-opaque-ciphertext==") == 1


def test_session_meta_survives_dropping_every_message_but_the_last(tmp_path: Path) -> None:
    doc = load(RAW)
    conv = doc.conversation.with_messages(doc.conversation.messages[-1:])
    out = dump_and_restore(doc, conv, tmp_path)
    types = [r["type"] for r in lines(out)]
    assert types[0] == "session_meta"
    assert "turn_context" not in types
    assert types[-1] == "response_item"


def test_new_message_is_a_response_item(tmp_path: Path) -> None:
    doc = load(RAW)
    note = Message("user", (Block(Kind.TEXT, "Summary: files listed, retries bumped."),))
    conv = doc.conversation.with_messages([*doc.conversation.messages, note])
    out = dump_and_restore(doc, conv, tmp_path)
    last = lines(out)[-1]
    assert last == {
        "timestamp": "2026-01-14T10:00:07.000Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Summary: files listed, retries bumped."}],
        },
    }


def test_removed_call_and_output_drop_their_records(tmp_path: Path) -> None:
    doc = load(RAW)
    conv = doc.conversation
    keep = [
        m if m.blocks and m.blocks[0].call_id != "call_C" else m.with_blocks([])
        for m in conv.messages
    ]
    out = dump_and_restore(doc, conv.with_messages(keep), tmp_path)
    assert b"call_C" not in out
    assert len(lines(out)) == len(lines(RAW)) - 2


def test_forcing_codex_on_another_format_is_an_error() -> None:
    other = (FIXTURES / "claude_code" / "session.jsonl").read_bytes()
    with pytest.raises(TranscriptError, match=r"^x\.jsonl:1: no record is a Codex rollout record"):
        load(other, "x.jsonl", format="codex")
