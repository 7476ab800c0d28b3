"""head_tail: long tool results keep their head and tail; the middle is offloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.errors import ConfigError
from ctxcli.core.hints import truncation_hint
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.pipeline.config import build_config
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger, get_stage
from ctxcli.stages.head_tail import HeadTailOptions, head_tail, is_head_tailed
from ctxcli.store.naming import Preview


def _conv(*outputs: str, read_args: str = '{"path": "x"}') -> Conversation:
    messages = [Message("user", (Block(Kind.TEXT, "go"),), key=0)]
    for i, out in enumerate(outputs):
        messages.append(
            Message("assistant", (Block(Kind.TOOL_CALL, read_args, f"c{i}", "read_file"),))
        )
        messages.append(Message("tool", (Block(Kind.TOOL_RESULT, out, f"c{i}"),)))
    return Conversation(tuple(messages))


def _ctx() -> StageContext:
    return StageContext(TokenLedger(get_counter("approx")), Preview("off"))


def _results(conv: Conversation) -> list[str]:
    return [b.text for _ref, b in conv.iter_blocks(Kind.TOOL_RESULT)]


LONG = "".join(f"line {i:04d}: {'x' * 40}\n" for i in range(100))  # 5,100 chars


def test_cuts_long_results_to_head_marker_and_tail() -> None:
    conv = _conv(LONG, "short", "recent 1", "recent 2")
    result = head_tail(conv, HeadTailOptions(), _ctx())
    out = _results(result.conversation)[0]
    removed = len(LONG) - 900 - 700
    assert out.startswith(LONG[:900] + "\n\n")
    assert out.endswith("\n\n" + LONG[-700:])
    assert (
        f"\n\n[... {removed} chars truncated ...]\n[ctx: full output saved to off/head_tail/c0]\n\n"
        in out
    )
    assert _results(result.conversation)[1:] == ["short", "recent 1", "recent 2"]
    assert result.counters["compressions"] == 1
    assert result.counters["chars_saved"] == len(LONG) - len(out)


def test_full_text_is_offloaded() -> None:
    ctx = _ctx()
    assert isinstance(ctx.offload, Preview)
    head_tail(_conv(LONG, "a", "b"), HeadTailOptions(), ctx)
    assert list(ctx.offload.files) == ["head_tail/c0"]


def test_last_results_are_exempt() -> None:
    conv = _conv(LONG, LONG, LONG)
    result = head_tail(conv, HeadTailOptions(keep_recent_results=2), _ctx())
    outs = _results(result.conversation)
    assert is_head_tailed(outs[0]) and outs[1:] == [LONG, LONG]
    everything = head_tail(conv, HeadTailOptions(keep_recent_results=0), _ctx())
    assert all(is_head_tailed(t) for t in _results(everything.conversation))


def test_no_op_when_nothing_is_long() -> None:
    conv = _conv("a" * 1800, "b", "c")
    result = head_tail(conv, HeadTailOptions(), _ctx())
    assert result.conversation is conv
    assert result.counters["compressions"] == 0


def test_rerun_changes_nothing_even_when_output_is_still_long() -> None:
    opts = HeadTailOptions(threshold_chars=1000, head_chars=800, tail_chars=150)
    once = head_tail(_conv(LONG, "a", "b"), opts, _ctx()).conversation
    assert len(_results(once)[0]) > opts.threshold_chars  # would be cut again if not recognised
    twice = head_tail(once, opts, _ctx())
    assert twice.conversation is once
    assert twice.counters["compressions"] == 0


def test_offload_false_writes_nothing_and_says_so() -> None:
    ctx = _ctx()
    result = head_tail(_conv(LONG, "a", "b"), HeadTailOptions(offload=False), ctx)
    out = _results(result.conversation)[0]
    removed = len(LONG) - 1600
    assert out == f"{LONG[:900]}\n\n[... {removed} chars truncated ...]\n\n{LONG[-700:]}"
    assert isinstance(ctx.offload, Preview) and ctx.offload.files == {}
    assert result.counters["not_offloaded"] == 1
    assert any("offload = false" in n for n in result.notes)


def test_preview_of_truncate_tool_output_keeps_its_hint() -> None:
    hint = truncation_hint(
        "en", path="off/trunc/c0", total=90000, omitted=80000, read_tool="read_file"
    )
    previewed = f"{'H' * 5000}\n{hint}\n{'T' * 5000}"
    result = head_tail(_conv(previewed, "a", "b"), HeadTailOptions(), _ctx())
    out = _results(result.conversation)[0]
    assert hint in out  # the way back to the full output survives
    assert out.startswith("H" * 900) and out.endswith("T" * 700)
    # what was cut: the head's and the tail's sides of the old preview, newlines included
    assert f"[... {5001 - 900 + 5001 - 700} chars truncated ...]" in out
    assert result.counters["already_truncated"] == 1
    assert is_head_tailed(out)


def test_reading_our_own_offload_file_is_not_cut_again() -> None:
    conv = _conv(LONG, "a", "b", read_args='{"path": "off/head_tail/c0"}')
    assert head_tail(conv, HeadTailOptions(), _ctx()).counters["compressions"] == 0


def test_head_plus_tail_must_be_shorter_than_threshold() -> None:
    with pytest.raises(ConfigError) as info:
        build_config(
            {"stages": [{"use": "head_tail", "head_chars": 1000, "tail_chars": 1000}]}, "ctx.toml"
        )
    # A check across fields names them all, with no empty field name or stray prefix.
    assert str(info.value) == (
        "ctx.toml: stages[1] (head_tail): head_chars + tail_chars (1000 + 1000 = 2000) must "
        "be less than threshold_chars (1800), or no result would get shorter; raise "
        "threshold_chars or lower head_chars or tail_chars. Run 'ctx stages head_tail' for "
        "options."
    )


def test_registered_with_a_docstring() -> None:
    spec = get_stage("head_tail")
    assert spec.summary.startswith("Keep the first head_chars")
    assert "Interacts with" in spec.doc


def _jsonl(*outputs: str) -> bytes:
    lines: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    for i, out in enumerate(outputs):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        lines.append({"role": "assistant", "content": None, "tool_calls": [call]})
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def test_reduce_and_restore_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(_jsonl(LONG, LONG, "a", "b"))
    config = build_config({"stages": [{"use": "head_tail"}]}, "test")
    report, data = reduce_file(src, tmp_path / "out.jsonl", config=config)
    assert report.stages[0].counters["compressions"] == 2
    assert len(data) < len(src.read_bytes())
    offload = tmp_path / "out.jsonl.offload"
    assert (offload / "head_tail" / "c0").read_text() == LONG
    assert restore_file(tmp_path / "out.jsonl") == src.read_bytes()
