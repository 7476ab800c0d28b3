"""strip_tool_calls and strip_and_truncate: calls and results leave in pairs."""

from __future__ import annotations

import json
from pathlib import Path

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import build_config
from support.stage_helpers import SYNAPTIC as FIXTURES
from support.stage_helpers import fixture, run


def reduce(tmp_path: Path, name: str, stages: list[dict[str, object]]) -> tuple[bytes, bytes]:
    """Reduce a fixture end to end; check restore, rerun and pairing; return (in, out)."""
    source = tmp_path / name
    source.write_bytes((FIXTURES / name).read_bytes())
    config = build_config({"stages": stages}, "test")
    out = tmp_path / f"{name}.out"
    _, data = reduce_file(source, out, config=config, offload_dir=tmp_path / "off")
    assert restore_file(out, offload_dir=tmp_path / "off") == source.read_bytes()
    _, again = reduce_file(out, config=config, offload_dir=tmp_path / "again")
    assert again == data
    assert validate_bytes(data) == []
    return source.read_bytes(), data


def test_openai_chat_keeps_only_what_was_said(tmp_path: Path) -> None:
    before, after = reduce(tmp_path, "parallel.jsonl", [{"use": "strip_tool_calls"}])
    records = [json.loads(line) for line in after.splitlines()]
    assert records == [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "The add test fails. Fix src/calc.py."},
        # Text and a call: the text stays, the tool_calls key goes.
        {"role": "assistant", "content": "add subtracts; fixing it."},
        {"role": "assistant", "content": "Fixed: add adds again; all 4 tests pass."},
        {"role": "user", "content": "Thanks. Now run the linters."},
        {"role": "assistant", "content": "Lint and types are clean."},
    ]
    # Untouched records are copied byte for byte.
    assert after.splitlines()[0] == before.splitlines()[0]


def test_counters_and_offloaded_text() -> None:
    result = run("strip_tool_calls", fixture("parallel.jsonl"))
    assert result.counters == {"calls_removed": 7, "results_removed": 7, "messages_dropped": 10}
    assert result.notes == (
        "removed 7 tool calls and 7 results; their text is in off/strip_tool_calls/r2-r14",
    )


def test_offload_file_holds_the_removed_blocks(tmp_path: Path) -> None:
    reduce(tmp_path, "parallel.jsonl", [{"use": "strip_tool_calls"}])
    text = (tmp_path / "off" / "strip_tool_calls" / "r2-r14").read_text()
    assert '[tool call edit_file id=c4]\n{"path": "src/calc.py"' in text
    assert "[tool result bash id=c2]\nExit code: 1" in text
    # The kept text of a changed message is not repeated there.
    assert "add subtracts; fixing it." not in text


def test_anthropic_results_and_text_in_one_turn(tmp_path: Path) -> None:
    _, after = reduce(tmp_path, "anthropic_parallel.jsonl", [{"use": "strip_tool_calls"}])
    records = [json.loads(line) for line in after.splitlines()]
    assert records == [
        {"role": "user", "content": "Check disk usage and the uptime of the build host."},
        # The thinking-and-calls turn is gone; the results turn keeps its question.
        {"role": "user", "content": [{"type": "text", "text": "Also, is 91% a problem?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "Disk is at 91%: worth cleaning up. "
                    "Let me look at the biggest directories.",
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "/var/lib holds 30G; the host is up 3 days. "
                    "91% is high: clean /var/log first.",
                }
            ],
        },
    ]


def test_keep_last_rounds_leaves_the_work_in_progress() -> None:
    # A round is a response that calls tools, with its results; an answer without
    # calls is none, so the two rounds kept are the last two that used tools.
    conv = fixture("parallel.jsonl")
    result = run("strip_tool_calls", conv, keep_last_rounds=2)
    keys = [m.key for m in result.conversation.messages]
    assert keys == [0, 1, 6, 8, 9, 10, 11, 12, 13, 14, 15]
    calls = [len(m.tool_calls) for m in result.conversation.messages]
    assert calls == [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]
    # Mid-loop (the results just came back), one round keeps the calls being answered.
    mid_loop = conv.with_messages(conv.messages[:15])
    result = run("strip_tool_calls", mid_loop, keep_last_rounds=1)
    assert [m.key for m in result.conversation.messages] == [0, 1, 6, 10, 11, 12, 13, 14]


def test_keep_tools_keeps_those_pairs_only(tmp_path: Path) -> None:
    _, after = reduce(
        tmp_path, "parallel.jsonl", [{"use": "strip_tool_calls", "keep_tools": ["bash"]}]
    )
    records = [json.loads(line) for line in after.splitlines()]
    calls = [c["id"] for r in records for c in r.get("tool_calls", [])]
    results = [r["tool_call_id"] for r in records if r["role"] == "tool"]
    assert calls == ["c2", "c5", "c6", "c7"]
    assert sorted(results) == sorted(calls)
    # The parallel turn lost two of its three calls but kept the bash one.
    assert records[2]["tool_calls"][0]["function"]["name"] == "bash"


def _msg(role: str, *blocks: Block, key: int) -> Message:
    return Message(role, tuple(blocks), key)


def test_thinking_that_led_only_to_calls_goes_with_them() -> None:
    conv = Conversation(
        (
            _msg("user", Block(Kind.TEXT, "go"), key=0),
            _msg(
                "assistant",
                Block(Kind.THINKING, "let me look"),
                Block(Kind.TOOL_CALL, "{}", "a", "ls"),
                key=1,
            ),
            _msg("user", Block(Kind.TOOL_RESULT, "x", "a"), key=2),
            _msg(
                "assistant",
                Block(Kind.THINKING, "found it"),
                Block(Kind.TEXT, "It is x."),
                key=3,
            ),
        )
    )
    result = run("strip_tool_calls", conv)
    assert [m.key for m in result.conversation.messages] == [0, 3]
    # A message without tool blocks is the very same object: it is not rewritten.
    assert result.conversation.messages[1] is conv.messages[3]


def test_an_orphaned_result_in_the_input_is_removed_too() -> None:
    conv = Conversation(
        (
            _msg("user", Block(Kind.TEXT, "go"), key=0),
            _msg("tool", Block(Kind.TOOL_RESULT, "late", "ghost"), key=1),
            _msg("assistant", Block(Kind.TEXT, "done"), key=2),
        )
    )
    result = run("strip_tool_calls", conv)
    assert [m.key for m in result.conversation.messages] == [0, 2]
    assert result.counters["results_removed"] == 1


def test_no_tool_calls_is_a_noop() -> None:
    conv = Conversation((_msg("user", Block(Kind.TEXT, "hi"), key=0),))
    result = run("strip_tool_calls", conv)
    assert result.conversation is conv
    assert result.notes == ("no tool calls or results to remove",)


def test_strip_and_truncate_counts_only_conversation(tmp_path: Path) -> None:
    before, after = reduce(
        tmp_path, "parallel.jsonl", [{"use": "strip_and_truncate", "keep_messages": 2}]
    )
    lines = before.splitlines(keepends=True)
    assert after == lines[0] + lines[11] + lines[15]
    result = run("strip_and_truncate", fixture("parallel.jsonl"), keep_messages=2)
    assert result.counters == {
        "calls_removed": 7,
        "results_removed": 7,
        "messages_dropped": 13,
        "cut_moved": 0,
    }
    assert result.notes[1] == "dropped 3 messages; their text is in off/keep_last/r1-r10"


def test_strip_and_truncate_is_the_two_stages_in_a_row(tmp_path: Path) -> None:
    options = {"keep_messages": 3, "keep_last_rounds": 1, "keep_tools": ["grep"]}
    _, combined = reduce(tmp_path, "parallel.jsonl", [{"use": "strip_and_truncate", **options}])
    _, chained = reduce(
        tmp_path,
        "parallel.jsonl",
        [
            {"use": "strip_tool_calls", "keep_last_rounds": 1, "keep_tools": ["grep"]},
            {"use": "keep_last", "keep_messages": 3},
        ],
    )
    assert combined == chained


def test_a_transcript_of_only_tool_traffic_is_kept() -> None:
    # Stripping it would leave an empty file that ctx itself could not read back.
    conv = Conversation(
        (
            _msg("assistant", Block(Kind.TOOL_CALL, "{}", "a", "ls"), key=0),
            _msg("tool", Block(Kind.TOOL_RESULT, "x", "a"), key=1),
        )
    )
    result = run("strip_tool_calls", conv)
    assert result.conversation is conv
    assert result.counters == {"calls_removed": 0, "results_removed": 0, "messages_dropped": 0}
    assert result.notes == ("only tool calls and results; kept",)
