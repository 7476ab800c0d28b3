"""Claude Code session JSONL: detection, lossless round trips, UI copies, uuid tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats import Document, get_format, load
from ctxcli.formats.claude_code import ClaudeCode
from ctxcli.formats.validate import validate_bytes
from ctxcli.sessions import diagnose
from ctxcli.store.naming import Preview
from support.format_golden import (
    FIXTURES,
    assert_identity,
    config,
    dump_and_restore,
    golden_roundtrip,
    lines,
)

SRC = FIXTURES / "claude_code" / "session.jsonl"
RAW = SRC.read_bytes()


def by_uuid(raw: bytes) -> dict[str, Any]:
    return {r["uuid"]: r for r in lines(raw) if "uuid" in r}


def messages_of(doc: Document, *uuids: str) -> list[Message]:
    """The conversation's messages loaded from the records with these uuids."""
    want = set(uuids)
    return [m for m in doc.conversation if doc.records[m.key or 0].data.get("uuid") in want]


def test_sniff_detects_claude_code() -> None:
    assert load(RAW).format.name == "claude_code"
    other = FIXTURES / "codex" / "rollout.jsonl"
    assert not ClaudeCode().sniff(lines(other.read_bytes()))
    assert not ClaudeCode().sniff([{"role": "user", "content": "hi"}])


def test_load_dump_without_stage_is_identity() -> None:
    assert_identity(RAW)


def test_only_user_and_assistant_records_are_messages() -> None:
    doc = load(RAW)
    types = [doc.records[m.key or 0].data["type"] for m in doc.conversation]
    assert set(types) == {"user", "assistant"}
    assert len(doc.conversation) == sum(1 for r in lines(RAW) if r["type"] in ("user", "assistant"))
    first = doc.conversation.messages[0]
    assert first.role == "user" and first.blocks[0].kind is Kind.TEXT
    thinking = [b for m in doc.conversation for b in m.blocks if b.kind is Kind.THINKING]
    assert [b.text for b in thinking] == ["Two independent reads: run them in parallel."]
    # A tool_result whose content is a list of text blocks is one result block.
    (task,) = messages_of(doc, "r-2")
    assert [b.kind for b in task.blocks] == [Kind.TOOL_RESULT]
    assert task.blocks[0].text.endswith("agentId: 7f3a (for resuming)")


def test_records_of_one_response_form_one_round() -> None:
    conv = load(RAW).conversation
    doc = load(RAW)
    groups = {m.group for m in messages_of(doc, "a-1", "a-2", "a-3", "a-4")}
    assert groups == {"msg_01"}
    rounds = conv.rounds()
    assert len(rounds) == 4
    # v2.1.6 layout: all calls, then all results.
    first = rounds[0]
    assert len(first.assistant) == 4 and len(first.results) == 2
    # v2.1.39 layout: the response is split around its own results.
    third = rounds[2]
    assert len(third.assistant) == 2 and len(third.results) == 2
    for ref, _block in conv.iter_blocks(Kind.TOOL_RESULT):
        assert conv.call_of(ref) is not None


def test_truncation_changes_results_and_their_ui_copies_only(tmp_path: Path) -> None:
    out = golden_roundtrip(SRC, "claude_code", tmp_path)
    before, after = RAW.splitlines(), out.splitlines()
    assert len(before) == len(after)
    changed = {json.loads(b).get("uuid") for b, a in zip(before, after, strict=True) if a != b}
    assert changed == {"r-1", "q-1", "p-1"}
    new, old = by_uuid(out), by_uuid(RAW)
    for uuid in ("r-1", "q-1"):
        text = new[uuid]["message"]["content"][0]["content"]
        assert "[ctx: output truncated" in text and len(text) <= 256
        assert text[:20] == old[uuid]["message"]["content"][0]["content"][:20]
        # The UI copy of the output is gone; nothing else in the record moved.
        assert "toolUseResult" not in new[uuid]
        rest = {k: v for k, v in old[uuid].items() if k not in ("toolUseResult", "message")}
        assert {k: v for k, v in new[uuid].items() if k != "message"} == rest
    progress = new["p-1"]["data"]
    assert progress["output"] == "" and progress["fullOutput"] == ""
    assert progress["totalLines"] == 40
    # A hook_progress record of the same call is not a copy of the output.
    assert new["p-2"] == old["p-2"]
    assert len(out) < len(RAW) * 0.6


def test_thinking_is_never_rewritten() -> None:
    doc = load(RAW)
    (thinking,) = messages_of(doc, "a-1")
    edited = thinking.with_blocks([thinking.blocks[0].with_text("rewritten")])
    conv = doc.conversation.with_messages(
        [edited if m is thinking else m for m in doc.conversation]
    )
    out, script = doc.format.dump(doc, conv, Preview("offload"))
    assert out == RAW and script.ops == [["c", len(RAW.splitlines())]]


def _keep_from(doc: Document, uuid: str) -> list[Message]:
    start = next(
        i for i, m in enumerate(doc.conversation) if doc.records[m.key or 0].data["uuid"] == uuid
    )
    return list(doc.conversation.messages[start:])


def test_dropped_records_are_relinked_to_the_nearest_kept_ancestor(tmp_path: Path) -> None:
    doc = load(RAW)
    conv = doc.conversation.with_messages(_keep_from(doc, "u-2"))
    out = dump_and_restore(doc, conv, tmp_path)
    records = lines(out)
    kept = by_uuid(out)
    # Everything before u-2 hung off dropped records: u-2 becomes the root.
    assert kept["u-2"]["parentUuid"] is None
    assert kept["b-1"] == by_uuid(RAW)["b-1"]
    # The session title stays; progress and system records of dropped turns go.
    assert records[0]["type"] == "summary"
    assert not {"p-1", "p-2", "s-1", "u-1", "a-5"} & set(kept)
    assert validate_bytes(out) == []


def test_dropping_one_message_relinks_its_child(tmp_path: Path) -> None:
    doc = load(RAW)
    (a5,) = messages_of(doc, "a-5")
    conv = doc.conversation.with_messages([m for m in doc.conversation if m is not a5])
    out = dump_and_restore(doc, conv, tmp_path)
    kept = by_uuid(out)
    assert "a-5" not in kept
    assert kept["u-2"]["parentUuid"] == "s-1"
    # The queue item that followed the dropped message goes with it.
    assert not any(r["type"] == "queue-operation" for r in lines(out))


def _note(text: str) -> Message:
    return Message("user", (Block(Kind.TEXT, text),))


def test_inserted_summary_becomes_part_of_the_chain(tmp_path: Path) -> None:
    doc = load(RAW)
    conv = doc.conversation.with_messages(
        [_note("Summary of the first turn."), *_keep_from(doc, "u-2")]
    )
    out = dump_and_restore(doc, conv, tmp_path)
    records = lines(out)
    (new,) = [
        r for r in records if r.get("message", {}).get("content") == "Summary of the first turn."
    ]
    assert new["type"] == "user" and new["parentUuid"] is None
    assert new["sessionId"] == "5e55-0001" and new["cwd"] == "/home/dev/proj"
    assert new["timestamp"] == by_uuid(RAW)["u-1"]["timestamp"]
    assert by_uuid(out)["u-2"]["parentUuid"] == new["uuid"]
    # No randomness and no clock: the same edit gives the same bytes.
    again, _ = doc.format.dump(doc, conv, Preview("offload"))
    assert again == out


def test_inserted_nudge_in_the_middle_and_duplicate_uuids(tmp_path: Path) -> None:
    doc = load(RAW)
    (a5,) = messages_of(doc, "a-5")
    msgs: list[Message] = []
    for m in doc.conversation:
        msgs.append(m)
        if m is a5:
            msgs += [_note("keep going"), _note("keep going")]
    out = dump_and_restore(doc, doc.conversation.with_messages(msgs), tmp_path)
    notes = [r for r in lines(out) if r.get("message", {}).get("content") == "keep going"]
    assert len(notes) == 2 and notes[0]["uuid"] != notes[1]["uuid"]
    assert notes[0]["parentUuid"] == "a-5" and notes[1]["parentUuid"] == notes[0]["uuid"]
    assert by_uuid(out)["u-2"]["parentUuid"] == notes[1]["uuid"]


def test_removing_every_block_drops_the_record(tmp_path: Path) -> None:
    doc = load(RAW)
    (a2,) = messages_of(doc, "a-2")
    conv = doc.conversation.with_messages(
        [m.with_blocks([]) if m is a2 else m for m in doc.conversation]
    )
    out = dump_and_restore(doc, conv, tmp_path)
    assert "a-2" not in by_uuid(out)
    assert by_uuid(out)["a-3"]["parentUuid"] == "a-1"


def test_check_flags_dangling_parents_only() -> None:
    # The record tree is a rule of the client's (ctx doctor), not of every transcript.
    assert diagnose(RAW).problems == []  # the summary's leafUuid dangles: allowed
    broken = RAW.replace(b'"parentUuid":"a-5"', b'"parentUuid":"gone"')
    (problem,) = diagnose(broken).problems
    assert problem.kind == "dangling_parent" and "'gone'" in problem.message
    assert problem.line == 15
    assert validate_bytes(broken) == []


def test_a_kept_invalid_line_still_defines_its_uuid() -> None:
    raw_lines = RAW.splitlines(keepends=True)
    broken = raw_lines[14].replace(b'"content":"Now', b'"content":"\\[Now')
    assert b'"uuid":"u-2"' in broken
    data = b"".join([*raw_lines[:14], broken, *raw_lines[15:]])
    with pytest.raises(Exception, match=":15:"):
        load(data, on_invalid="error")
    assert any(":15: not valid JSON" in w for w in load(data).warnings)  # kept by default
    # Kept, the line is a problem; the client cannot read the uuid it defines, so the
    # record whose parent it is hangs from nothing (ctx doctor's rule, as the client sees).
    problems = validate_bytes(data, on_invalid="keep")
    assert [(p.line, p.kind) for p in problems] == [(15, "malformed_line")]
    dangling = [p for p in diagnose(data).problems if p.kind == "dangling_parent"]
    assert dangling and all("line 15, which the client cannot parse" in p.message for p in dangling)


def test_default_and_clearing_configs(tmp_path: Path) -> None:
    cfg = config(
        {"use": "truncate_tool_output", "max_chars": 300},
        {"use": "clear_tool_results", "max_tokens": 0, "keep_rounds": 0, "clear_arguments": True},
    )
    out = golden_roundtrip(SRC, "claude_code", tmp_path, cfg)
    new = by_uuid(out)
    for uuid in ("r-1", "q-1"):
        text = new[uuid]["message"]["content"][0]["content"]
        assert text.startswith("[ctx cleared: ")
        assert "toolUseResult" not in new[uuid]
    assert get_format("claude_code") is load(out).format


def test_forcing_claude_code_on_another_format_is_an_error() -> None:
    codex = (FIXTURES / "codex" / "rollout.jsonl").read_bytes()
    with pytest.raises(TranscriptError, match=r"^x\.jsonl:1: no record is a Claude Code record"):
        load(codex, "x.jsonl", format="claude_code")
