"""The recorded bill: each API response once, priced; checked against an independent count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import TranscriptError
from ctxcli.cost.prices import TokenUsage
from ctxcli.cost.recorded import recorded_cost
from support.cost_sessions import ClaudeSession, CodexRollout, text, tool_use, usage
from support.paths import SHARED, need_shared, shared_transcripts


def test_a_split_response_is_counted_once(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("list files", at=0)
    blocks = [{"type": "thinking", "thinking": "hm", "signature": "x"}, text("ok"),
              tool_use("t1", "ls")]  # fmt: skip
    s.response("msg_1", blocks, at=2, use=usage(inp=3, read=10_000, write=2_000, out=250))
    s.result("t1", "a\nb", at=4)
    s.response("msg_2", [text("done")], at=6, use=usage(inp=1, read=12_000, write=50, out=9))
    bill = recorded_cost(s.write(tmp_path / "s.jsonl"))
    assert bill.format == "claude_code"
    assert [r.key for r in bill.requests] == ["msg_1", "msg_2"]
    first = bill.requests[0]
    # Input and cache figures once; the output of the last record, not the streaming 1s.
    assert first.usage == TokenUsage(input=3, cache_read=10_000, cache_write_5m=2_000, output=250)
    assert first.line == 2
    assert first.usd == pytest.approx((3 * 3 + 10_000 * 0.3 + 2_000 * 3.75 + 250 * 15) / 1e6)
    assert bill.usage.output == 259
    assert bill.usd == pytest.approx(sum(r.usd or 0 for r in bill.requests))
    assert bill.read_usd == pytest.approx(22_000 * 0.3 / 1e6)


def test_error_notes_synthetic_messages_and_bad_lines_are_not_calls(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("hi", at=0)
    s.response("msg_1", [text("hello")], at=1, use=usage(write=5_000, out=3))
    s.response("e1", [text("API Error: overloaded")], at=2, use=usage(inp=0, out=0),
               isApiErrorMessage=True)  # fmt: skip
    s.model = "<synthetic>"
    s.response("e2", [text("No response requested.")], at=3, use=usage(inp=0, out=0))
    bill = recorded_cost(s.write(tmp_path / "s.jsonl", extra_lines=['{"type": "user", "messa']))
    assert [r.key for r in bill.requests] == ["msg_1"]
    assert (bill.skipped_records, bill.malformed_lines) == (2, 1)


def test_one_hour_writes_and_sidechains(tmp_path: Path) -> None:
    s = ClaudeSession(model="claude-opus-4-6")
    s.user("go", at=0)
    s.response("m1", [text("a")], at=1, use=usage(write=4_000, hour=3_000, out=7), isSidechain=True)
    bill = recorded_cost(s.write(tmp_path / "s.jsonl"))
    (only,) = bill.requests
    assert (only.usage.cache_write_5m, only.usage.cache_write_1h) == (1_000, 3_000)
    assert only.sidechain
    assert only.usd == pytest.approx((3 * 5 + 1_000 * 6.25 + 3_000 * 10 + 7 * 25) / 1e6)


def test_unknown_models_are_listed_not_priced(tmp_path: Path) -> None:
    s = ClaudeSession(model="claude-99")
    s.user("hi", at=0)
    s.response("m1", [text("a")], at=1, use=usage(out=5))
    bill = recorded_cost(s.write(tmp_path / "s.jsonl"))
    assert bill.requests[0].usd is None
    assert (bill.usd, bill.unpriced_models) == (0, ("claude-99",))


def test_codex_repeated_totals_and_a_restart(tmp_path: Path) -> None:
    r = CodexRollout()
    r.user("fix it", at=0)
    r.call(at=5, inp=3_000, cached=2_560, out=200, reasoning=128, repeat=2)
    r.call(at=9, inp=3_500, cached=2_944, out=50)
    r.reset()
    r.call(at=900, inp=4_000, cached=0, out=20, repeat=3)
    bill = recorded_cost(r.write(tmp_path / "rollout.jsonl"))
    assert bill.format == "codex"
    assert [q.key for q in bill.requests] == ["call-1", "call-2", "call-3"]
    assert [q.usage.input_total for q in bill.requests] == [3_000, 3_500, 4_000]
    assert bill.requests[0].usage == TokenUsage(input=440, cache_read=2_560, output=200)
    assert bill.requests[0].model == "gpt-5-codex"
    assert bill.usd == pytest.approx(
        (440 + 556 + 4_000) * 1.25e-6 + (2_560 + 2_944) * 0.125e-6 + 270 * 10e-6
    )


def test_not_a_session(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    with pytest.raises(TranscriptError, match="chat.jsonl: not a Claude Code session"):
        recorded_cost(path)


# --- the real sessions, against a count made another way ------------------------------------


def _sessions(prefix: str) -> list[Path]:
    return [p for p in shared_transcripts() if p.name.startswith(prefix)]


def _need_shared() -> None:
    need_shared()


def _claude_independent(path: Path) -> tuple[int, dict[str, int]]:
    """Unique (message.id, requestId) pairs with stdlib json; the last record's usage wins."""
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        message = record.get("message") or {}
        if record.get("type") != "assistant" or "usage" not in message:
            continue
        if record.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
            continue
        last[(message["id"], record["requestId"])] = message["usage"]
    sums = {
        k: sum(u[k] for u in last.values())
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                  "output_tokens")
    }  # fmt: skip
    return len(last), sums


@pytest.mark.parametrize("name", ["cc_spotter", "cc_mclaude"])
def test_claude_code_calls_match_an_independent_count(name: str) -> None:
    _need_shared()
    for path in _sessions(name):
        calls, sums = _claude_independent(path)
        bill = recorded_cost(path)
        u = bill.usage
        assert len(bill.requests) == calls, path.name
        assert (u.input, u.cache_read, u.cache_write, u.output) == (
            sums["input_tokens"],
            sums["cache_read_input_tokens"],
            sums["cache_creation_input_tokens"],
            sums["output_tokens"],
        ), path.name


def _codex_independent(path: Path) -> tuple[int, dict[str, int]]:
    """Distinct cumulative totals (a set), and the sum of each counter run's last total."""
    seen: set[str] = set()
    runs: list[dict[str, int]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        payload = record.get("payload") or {}
        info = payload.get("info") if payload.get("type") == "token_count" else None
        if not info:
            continue
        total = info["total_token_usage"]
        seen.add(json.dumps(total, sort_keys=True))
        if runs and total["input_tokens"] >= runs[-1]["input_tokens"]:
            runs[-1] = total
        else:
            runs.append(total)
    keys = ("input_tokens", "cached_input_tokens", "output_tokens")
    return len(seen), {k: sum(r[k] for r in runs) for k in keys}


def test_codex_calls_match_an_independent_count() -> None:
    _need_shared()
    for path in _sessions("codex_"):
        calls, sums = _codex_independent(path)
        bill = recorded_cost(path)
        u = bill.usage
        assert len(bill.requests) == calls, path.name
        assert (u.input_total, u.cache_read, u.output) == (
            sums["input_tokens"],
            sums["cached_input_tokens"],
            sums["output_tokens"],
        ), path.name


def test_the_figures_of_the_issue() -> None:
    """Issue 36 quotes cc_spotter's reads and writes (11.6M, 480k) from the recorded usage."""
    _need_shared()
    spotter = recorded_cost(SHARED / "cc_spotter_4d5611e5.jsonl")
    assert len(spotter.requests) == 139
    assert spotter.usage.cache_read == 11_618_567
    assert spotter.usage.cache_write == 479_537
    mclaude = recorded_cost(SHARED / "cc_mclaude_c76e5be5.jsonl")
    assert (len(mclaude.requests), mclaude.malformed_lines) == (320, 1)
    assert mclaude.usage.cache_read == 26_876_495
