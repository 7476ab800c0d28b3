"""nudge_early_exit: one user message for an agent going round in circles, never two."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxcli.api import reduce_bytes
from ctxcli.core.model import Kind
from ctxcli.core.monitors import conversation_monitors
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.stages.nudge_early_exit import (
    DEFAULT_NUDGE,
    NudgeEarlyExitOptions,
    nudge_early_exit,
)
from ctxcli.store.naming import Preview
from support.paths import SHARED


def _call(i: int, name: str, args: dict[str, Any], thought: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": thought,
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def _transcript(
    calls: list[tuple[str, dict[str, Any], str | None]], *, answer_last: bool = True
) -> bytes:
    lines: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i, (name, args, thought) in enumerate(calls):
        lines.append(_call(i, name, args, thought))
        if answer_last or i < len(calls) - 1:
            lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i}"})
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _varied(n: int) -> list[tuple[str, dict[str, Any], str | None]]:
    tools = ["read", "grep", "edit", "bash", "ls"]
    return [(tools[i % 5], {"arg": i}, "Working on it.") for i in range(n)]


LOOP = [("grep", {"pattern": "bug", "path": "src"}, "Searching again.")] * 6


def _reduce(raw: bytes, **opts: Any) -> Any:
    config = build_config({"stages": [{"use": "nudge_early_exit", **opts}]}, "test")
    return reduce_bytes(raw, config=config)


def _last(raw: bytes) -> Any:
    return load(raw, "t").conversation.messages[-1]


def test_a_streak_after_enough_calls_gets_one_nudge() -> None:
    raw = _transcript(_varied(40) + LOOP)
    reduced = _reduce(raw)
    stage = reduced.report.stages[0]
    assert stage.counters == {"nudges": 1, "model_calls": 46}
    last = _last(reduced.output)
    assert last.role == "user" and last.text == DEFAULT_NUDGE
    assert reduced.output.startswith(raw)  # only appended, nothing else touched
    assert reduced.output.endswith(
        b'{"role": "user", "content": "' + DEFAULT_NUDGE.encode() + b'"}\n'
    )


def test_rerun_does_not_nudge_twice() -> None:
    once = _reduce(_transcript(_varied(40) + LOOP)).output
    twice = _reduce(once)
    assert twice.output == once
    assert twice.report.stages[0].counters["nudges"] == 0
    assert "already nudged" in twice.report.stages[0].notes


def test_not_before_min_model_calls() -> None:
    raw = _transcript(_varied(10) + LOOP)
    assert _reduce(raw).output == raw
    assert _reduce(raw, min_model_calls=10).report.stages[0].counters["nudges"] == 1


def test_varied_work_is_not_stuck() -> None:
    raw = _transcript(_varied(60))
    reduced = _reduce(raw)
    assert reduced.output == raw
    assert reduced.report.stages[0].notes[0].startswith("not stuck: streak 0.00")


def test_threshold_options_decide() -> None:
    raw = _transcript(_varied(40) + LOOP[:3])  # streak 3/5 = 0.6: under the default 0.7
    assert _reduce(raw).report.stages[0].counters["nudges"] == 0
    assert _reduce(raw, streak_threshold=0.5).report.stages[0].counters["nudges"] == 1


def test_hedging_with_few_tools_nudges() -> None:
    sure = "I read the parser and the tokenizer; the offsets are computed in the lexer module."
    lost = "That didn't work, same error again. Maybe I should revert that. I am stuck."
    calls = [(t, {"i": i}, sure) for i, t in enumerate(["read", "grep", "edit", "bash"] * 10)]
    calls += [("bash", {"i": 100 + i}, lost) for i in range(20)]
    raw = _transcript(calls)
    stage = _reduce(raw).report.stages[0]
    assert stage.counters["nudges"] == 1, stage.notes
    assert "hedge 1.00" in stage.notes[0] and "diversity 1.00" in stage.notes[0]
    # the same hedging while still using many tools: not stuck
    varied = calls[:40] + [
        (t, {"i": 200 + i}, lost) for i, t in enumerate(["read", "grep", "edit", "bash", "ls"] * 4)
    ]
    assert _reduce(_transcript(varied)).report.stages[0].counters["nudges"] == 0


def test_never_between_a_call_and_its_result() -> None:
    raw = _transcript(_varied(40) + LOOP, answer_last=False)
    reduced = _reduce(raw)
    assert reduced.output == raw
    assert "awaits its result" in reduced.report.stages[0].notes[0]


def test_custom_text() -> None:
    reduced = _reduce(_transcript(_varied(40) + LOOP), text="Submit now.")
    assert _last(reduced.output).text == "Submit now."


def test_empty_text_is_rejected() -> None:
    from ctxcli.core.errors import ConfigError

    with pytest.raises(ConfigError, match="text"):
        build_config({"stages": [{"use": "nudge_early_exit", "text": ""}]}, "ctx.toml")


@pytest.mark.real_data
def test_real_hedging_agent() -> None:
    # deepseek on sqlfluff-1733: "going in circles", "same error", "Let me revert" late
    # in a 157-call run; its last call (the submission) has no result yet, so look at
    # the run just before it.
    raw = (SHARED / "minisweagent_sqlfluff-1733_deepseek-chat.traj.json").read_bytes()
    conv = load(raw, "mini").conversation
    before_submit = conv.with_messages(conv.messages[:-1])
    ctx = StageContext(TokenLedger(get_counter("approx")), Preview("off"))
    scores = conversation_monitors(before_submit)
    assert scores["hedge"] > 0.9 and scores["diversity"] == 0.5
    default = nudge_early_exit(before_submit, NudgeEarlyExitOptions(), ctx)
    assert default.counters["nudges"] == 0  # hedging, but 3 tools in the last 5 calls
    looser = nudge_early_exit(before_submit, NudgeEarlyExitOptions(diversity_threshold=0.4), ctx)
    assert looser.counters["nudges"] == 1
    last = looser.conversation.messages[-1]
    assert last.key is None and last.blocks[0].kind is Kind.TEXT
