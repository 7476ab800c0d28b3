"""codex-resume's Codex stages: old reasoning items go whole, the saved context size follows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import reduce_file, restore_file
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from support.paths import FIXTURES

WINDOW = 272_000


def rec(rtype: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-09-25T14:02:05.435Z", "type": rtype, "payload": payload}


def token_count(total: int) -> dict[str, Any]:
    usage = {
        "input_tokens": total - 100,
        "cached_input_tokens": 0,
        "output_tokens": 100,
        "reasoning_output_tokens": 0,
        "total_tokens": total,
    }
    info = {"total_token_usage": usage, "last_token_usage": usage, "model_context_window": WINDOW}
    return rec("event_msg", {"type": "token_count", "info": info})


def rollout(saved_total: int, turns: int = 4) -> bytes:
    records = [
        rec("session_meta", {"id": "0199812e-64f0-7f73-91fc-095dda01c36e", "cwd": "/w"}),
        rec(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix it"}],
            },
        ),
    ]
    for n in range(turns):
        summary = [] if n == 1 else [{"type": "summary_text", "text": f"**step {n}**"}]
        records += [
            rec(
                "response_item",
                {
                    "type": "reasoning",
                    "summary": summary,
                    "content": None,
                    "encrypted_content": "gAAAA" + "x" * 3000,
                },
            ),
            rec("event_msg", {"type": "agent_reasoning", "text": f"step {n}"}),
            rec(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": ["cat", f"f{n}.py"]}),
                    "call_id": f"call_{n}",
                },
            ),
            rec(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": f"call_{n}",
                    "output": json.dumps({"output": "line\n" * 2000, "metadata": {"exit_code": 0}}),
                },
            ),
            token_count(saved_total if n == turns - 1 else 1000 * (n + 1)),
        ]
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def reduce(raw: bytes, tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    src = tmp_path / "rollout.jsonl"
    src.write_bytes(raw)
    out = tmp_path / "out.jsonl"
    report, data = reduce_file(src, out, config=build_config({"preset": "codex-resume"}, "t"))
    assert restore_file(out) == raw
    assert validate_bytes(data, str(out)) == []
    again = reduce_bytes(data, config=build_config({"preset": "codex-resume"}, "t"), path=str(out))
    assert again.output == data and not again.report.changed
    return report, [json.loads(line) for line in data.splitlines()]


def items(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        r["payload"]
        for r in records
        if r["type"] == "response_item" and r["payload"]["type"] == kind
    ]


def test_old_reasoning_items_go_whole_and_the_events_after_them_stay(tmp_path: Path) -> None:
    _, records = reduce(rollout(5_000), tmp_path)
    reasoning = items(records, "reasoning")
    assert [r["summary"][0]["text"] for r in reasoning] == ["**step 3**"]  # the last response's
    # The one without a summary (encrypted only) went too; the UI events stay.
    assert len([r for r in records if r["payload"].get("type") == "agent_reasoning"]) == 4
    assert len(items(records, "function_call")) == len(items(records, "function_call_output")) == 4
    saved = tmp_path / "out.jsonl.offload" / "clear_thinking"
    assert "**step 0**" in "".join(p.read_text() for p in saved.iterdir())


def test_a_saved_context_size_over_half_the_window_is_scaled_down(tmp_path: Path) -> None:
    raw = rollout(int(WINDOW * 0.95))
    report, records = reduce(raw, tmp_path)
    counts = [r["payload"]["info"] for r in records if r["payload"].get("type") == "token_count"]
    last = counts[-1]["last_token_usage"]
    original = json.loads(raw.splitlines()[-1])["payload"]["info"]["last_token_usage"]
    assert last["total_tokens"] < original["total_tokens"] * 0.5
    # What usage trackers price stays.
    for field in (
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
    ):
        assert last[field] == original[field]
    assert counts[-1]["total_token_usage"] == original
    stage = next(s for s in report.stages if s.stage == "update_usage")
    assert stage.counters == {"records_updated": 1}
    assert stage.changed == 1


def test_a_small_saved_context_size_is_left_alone(tmp_path: Path) -> None:
    raw = rollout(50_000)
    report, records = reduce(raw, tmp_path)
    assert records[-1] == json.loads(raw.splitlines()[-1])
    stage = next(s for s in report.stages if s.stage == "update_usage")
    assert stage.counters == {"records_updated": 0}
    assert "no client compacts on it" in stage.notes[0]


def test_a_long_call_input_is_cleared_though_its_result_is_short(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: app.py\n" + "+x = 1\n" * 400 + "*** End Patch"
    records = [
        rec("session_meta", {"id": "0199812e-64f0-7f73-91fc-095dda01c36e", "cwd": "/w"}),
        rec(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        ),
        rec(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": patch,
                "call_id": "call_p",
            },
        ),
        rec(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success."},
        ),
    ]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    stage = {
        "use": "clear_tool_results",
        "max_tokens": 0,
        "keep_rounds": 0,
        "clear_arguments": True,
    }
    out = tmp_path / "out.jsonl"
    report, data = reduce_file(src, out, config=build_config({"stages": [stage]}, "t"))
    call = json.loads(data.splitlines()[2])["payload"]
    assert "ctx_cleared" in call["input"] and len(call["input"]) < 300
    assert json.loads(data.splitlines()[3])["payload"]["output"] == "Success."
    (args,) = (tmp_path / "out.jsonl.offload" / "clear").glob("*.args")
    assert args.read_text() == patch
    assert restore_file(out) == src.read_bytes()


CLAUDE = FIXTURES / "claude_code_resume" / "session.jsonl"


def claude_session(tmp_path: Path, cache_read: dict[str, int]) -> Path:
    records = [json.loads(line) for line in CLAUDE.read_bytes().splitlines()]
    for r in records:
        if r.get("uuid") in cache_read:
            r["message"]["usage"]["cache_read_input_tokens"] = cache_read[r["uuid"]]
    src = tmp_path / "session.jsonl"
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    return src


def test_claude_code_last_usage_is_scaled_on_a_record_trackers_skip(tmp_path: Path) -> None:
    # The last response is a-10 (thinking) + a-11 (text): trackers count a-10, the
    # client reads a-11 as the context size.
    src = claude_session(tmp_path, {"a-10": 150_000, "a-11": 150_000})
    out = tmp_path / "out.jsonl"
    stages = [{"use": "truncate_tool_output", "max_chars": 256}, {"use": "update_usage"}]
    report, data = reduce_file(src, out, config=build_config({"stages": stages}, "t"))
    assert restore_file(out) == src.read_bytes()
    by_uuid = {r.get("uuid"): r for r in map(json.loads, data.splitlines())}
    assert by_uuid["a-10"]["message"]["usage"]["cache_read_input_tokens"] == 150_000
    scaled = by_uuid["a-11"]["message"]["usage"]
    assert 0 < scaled["cache_read_input_tokens"] < 150_000
    assert by_uuid["a-11"]["message"]["content"][0]["type"] == "text"
    assert next(s for s in report.stages if s.stage == "update_usage").counters == {
        "records_updated": 1
    }


def test_claude_code_usage_trackers_count_is_left(tmp_path: Path) -> None:
    # a-07 is the only record of its response: trackers count it, so it stays.
    records = [json.loads(line) for line in CLAUDE.read_bytes().splitlines()]
    src = claude_session(tmp_path, {"a-07": 150_000})
    cut = next(i for i, r in enumerate(records) if r.get("uuid") == "a-07") + 1
    src.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:cut]))
    out = tmp_path / "out.jsonl"
    report, data = reduce_file(
        src, out, config=build_config({"stages": [{"use": "update_usage"}]}, "t")
    )
    assert data == src.read_bytes()
    stage = report.stages[0]
    assert "usage trackers count that record" in stage.notes[0]


@pytest.mark.xfail(
    strict=True,
    reason="update_usage is not idempotent while the scaled figure stays over above_share: "
    "_item_bytes sizes unchanged items smaller than the records hold them (a Codex "
    "function_call_output: its decoded text against its JSON-encoded string), so each run "
    "scales again; Claude Code sessions too (found by the golden cases of issue 40, left "
    "for a behaviour change)",
)
def test_a_second_run_leaves_a_figure_it_scaled_alone(tmp_path: Path) -> None:
    stages = [{"use": "clear_thinking"}, {"use": "update_usage"}]
    config = build_config({"stages": stages}, "t")
    src = tmp_path / "rollout.jsonl"
    src.write_bytes(rollout(int(WINDOW * 0.95)))
    out = tmp_path / "out.jsonl"
    _, data = reduce_file(src, out, config=config)
    again = reduce_bytes(data, config=config, path=str(out))
    assert again.output == data
