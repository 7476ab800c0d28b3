"""The peers' strategies on a recorded session (``ctx cost --compare``): Anthropic's
``clear_tool_uses_20250919`` by its documented rules (a test per parameter), LangChain's
real ``ClearToolUsesEdit``, observation masking, the client's compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.cost.alternatives import (
    ALTERNATIVES,
    CLEARED,
    Compaction,
    ContextEditing,
    ObservationMasking,
    alternative_requests,
)
from ctxcli.cost.replay import Sizer, build_requests
from ctxcli.cost.sequence import RequestSequence
from ctxcli.cost.session import CostOptions, session_cost
from support.cost_sessions import ClaudeSession, Words, text, usage
from support.paths import need_shared


def call(tid: str, name: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"command": command}}


def agent(tmp_path: Path, calls: int = 6, words: int = 100) -> RequestSequence:
    """One user turn, then ``calls`` tool calls (Bash, except every third: Read), each
    result ``words`` words long."""
    s = ClaudeSession()
    s.user("start", at=0)
    for n in range(calls):
        name = "Read" if n % 3 == 2 else "Bash"
        s.response(f"m{n}", [call(f"t{n}", name, f"c{n}")], at=1 + 2 * n, use=usage(write=10))
        s.result(f"t{n}", " ".join([f"r{n}"] * words), at=2 + 2 * n)
    s.response("last", [text("done")], at=2 * calls + 1, use=usage(write=10))
    return build_requests(s.write(tmp_path / "s.jsonl"))


def items(sequence: RequestSequence, kind: str, n: int = -1) -> dict[str, Any]:
    """Request ``n``'s tool results (``tool_result``: id -> content) or calls
    (``tool_use``: id -> input)."""
    id_field, value = ("tool_use_id", "content") if kind == "tool_result" else ("id", "input")
    out = {}
    for message in sequence.requests[n].messages:
        content = message.get("content")
        for item in content if isinstance(content, list) else []:
            if isinstance(item, dict) and item.get("type") == kind:
                out[item[id_field]] = item[value]
    return out


def results(sequence: RequestSequence, n: int = -1) -> dict[str, Any]:
    return items(sequence, "tool_result", n)


def inputs(sequence: RequestSequence, n: int = -1) -> dict[str, Any]:
    return items(sequence, "tool_use", n)


def edited(sequence: RequestSequence, **params: Any) -> RequestSequence:
    editing = ContextEditing(**params)
    run = alternative_requests(
        "anthropic_context_editing", sequence, Sizer(Words().count), editing=editing
    )
    return run.sequence


def cleared(sequence: RequestSequence, n: int = -1) -> list[str]:
    return sorted(k for k, v in results(sequence, n).items() if v == CLEARED)


def test_the_documented_defaults() -> None:
    d = ContextEditing()
    assert (d.trigger, d.trigger_value, d.keep) == ("input_tokens", 100_000, 3)
    assert (d.clear_at_least, d.exclude_tools, d.clear_tool_inputs) == (0, (), False)


def test_trigger_below_it_nothing_is_cleared(tmp_path: Path) -> None:
    seq = agent(tmp_path)  # ~600 words of results
    assert cleared(edited(seq)) == []  # the default trigger (100,000 tokens) is far off
    assert cleared(edited(seq, trigger_value=300)) == ["t0", "t1", "t2"]
    # By tool uses: more than 5 tool uses in the prompt.
    assert cleared(edited(seq, trigger="tool_uses", trigger_value=5)) == ["t0", "t1", "t2"]
    assert cleared(edited(seq, trigger="tool_uses", trigger_value=6)) == []


def test_keep_the_most_recent_tool_uses(tmp_path: Path) -> None:
    seq = agent(tmp_path)
    assert cleared(edited(seq, trigger_value=300, keep=1)) == ["t0", "t1", "t2", "t3", "t4"]
    assert cleared(edited(seq, trigger_value=300, keep=6)) == []


def test_clear_at_least_or_nothing(tmp_path: Path) -> None:
    seq = agent(tmp_path)  # each result ~100 tokens
    assert cleared(edited(seq, trigger_value=300, clear_at_least=250)) == ["t0", "t1", "t2"]
    assert cleared(edited(seq, trigger_value=300, clear_at_least=400)) == []


def test_exclude_tools_are_never_cleared(tmp_path: Path) -> None:
    seq = agent(tmp_path)
    assert cleared(edited(seq, trigger_value=300, exclude_tools=("Read",))) == ["t0", "t1"]


def test_clear_tool_inputs_clears_the_calls_too(tmp_path: Path) -> None:
    seq = agent(tmp_path)
    kept = edited(seq, trigger_value=300)
    assert inputs(kept)["t0"] == {"command": "c0"}
    emptied = edited(seq, trigger_value=300, clear_tool_inputs=True)
    assert inputs(emptied)["t0"] == {} and inputs(emptied)["t5"] == {"command": "c5"}


def test_each_request_is_edited_on_its_own_and_the_source_is_untouched(tmp_path: Path) -> None:
    seq = agent(tmp_path)
    out = edited(seq, trigger_value=300)
    # The client keeps its full history: the recorded requests are unchanged.
    assert cleared(seq) == []
    # An earlier request, over the trigger with fewer results, clears fewer of them.
    assert cleared(out, 5) == ["t0", "t1"]
    # A cleared result is the same bytes in every request (the cache can read it).
    a, b = out.requests[5], out.requests[6]
    assert [x.key for x in a.blocks[:3]] == [x.key for x in b.blocks[:3]]


def test_langchain_clear_tool_uses_is_langchains_own(tmp_path: Path) -> None:
    from langchain.agents.middleware.context_editing import DEFAULT_TOOL_PLACEHOLDER

    seq = agent(tmp_path, calls=8, words=60_000)  # over LangChain's 100,000-token trigger
    run = alternative_requests("langchain_clear_tool_uses", seq, Sizer(Words().count))
    last = results(run.sequence)
    assert sorted(k for k, v in last.items() if v == DEFAULT_TOOL_PLACEHOLDER) == [
        f"t{n}" for n in range(5)
    ]
    assert any(run.changed) and not run.changed[0]
    # Below the trigger LangChain leaves the request alone.
    small = alternative_requests("langchain_clear_tool_uses", agent(tmp_path), Sizer(Words().count))
    assert not any(small.changed)


def test_observation_masking_keeps_its_window(tmp_path: Path) -> None:
    seq = agent(tmp_path)
    run = alternative_requests(
        "observation_masking", seq, Sizer(Words().count), masking=ObservationMasking(window=2)
    )
    last = results(run.sequence)
    assert last["t0"] == "Old environment output: (1 lines omitted)"
    assert sorted(k for k, v in last.items() if v.startswith("Old environment")) == [
        "t0", "t1", "t2", "t3"
    ]  # fmt: skip
    assert ObservationMasking().window == 10


def test_client_compaction_at_its_threshold(tmp_path: Path) -> None:
    seq = agent(tmp_path)
    sizer = Sizer(Words().count)
    never = alternative_requests("client_compaction", seq, sizer)
    assert not any(never.changed) and never.sequence == seq
    small = Compaction(window=1_000, threshold=0.4, summary_tokens=50)
    run = alternative_requests("client_compaction", seq, sizer, compaction=small)
    keys = [r.key for r in run.sequence.requests]
    at = keys.index(next(k for k in keys if k.startswith("compact@")))
    summarising, after = run.sequence.requests[at], run.sequence.requests[at + 1]
    assert summarising.output_tokens == 50
    assert sum(sizer(b) for b in summarising.blocks) >= 400
    # The request after sends the summary, at its assumed size, and nothing before it.
    assert after.blocks[1].tokens == 50 and len(after.blocks) == 2
    assert sum(sizer(b) for b in run.sequence.requests[-1].blocks) < 400


@pytest.mark.real_data
def test_json_prices_every_alternative_on_a_real_session() -> None:
    path = need_shared() / "cc_spotter_4d5611e5.jsonl"
    data = session_cost(path, CostOptions(resume=None, alternatives=ALTERNATIVES)).to_dict()
    alts = {a["name"]: a for a in data["alternatives"]}
    assert list(alts) == list(ALTERNATIVES)
    for a in alts.values():
        assert set(a) >= {"name", "usd", "requests_changed", "cache_writes"}
    # Over 100,000 tokens, clearing all but three results on every request rewrites the
    # cache each time: dearer than the session as run, as Anthropic's docs warn.
    editing = alts["anthropic_context_editing"]
    assert editing["requests_changed"] > 0
    assert editing["usd"] > data["recorded_usd"]
    # ctx's default is cheaper than every alternative.
    assert all(data["with_ctx_anchored_usd"] < a["usd"] for a in alts.values())


def test_an_unknown_alternative_is_refused() -> None:
    seq = RequestSequence("x", "claude_code", "breakpoints", ())
    with pytest.raises(ConfigError, match="unknown alternative"):
        alternative_requests("nope", seq, lambda b: 0)
