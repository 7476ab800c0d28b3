"""ctx against its peers on the real transcripts, on the same input and counter.

* clear_tool_results against LangChain's ClearToolUsesEdit at equal settings (same
  trigger, same number of results kept, a placeholder of the same size): ctx saves
  at least as many tool-output tokens on every file.
* the claude-code-resume preset against cozempic: smaller files than its aggressive
  prescription and fewer tokens sent on resume than its standard one, on every
  Claude Code file.

The peer adapters live in benchmarks/peers.py, shared with ``make eval``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.bench.peers import cozempic_output, langchain_clear, resume_tokens, tool_outputs

from ctxcli.api import reduce_bytes
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger, get_stage
from ctxcli.store.naming import Preview
from support.paths import corpus, shared_transcripts

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_data,
]

WITH_TOOLS = [p for p in shared_transcripts() if not p.name.startswith("codex_agent-history")]
CLAUDE_CODE = [p for p in shared_transcripts() if p.name.startswith("cc_")]
COUNTER = get_counter("cl100k")


@pytest.mark.parametrize(("trigger", "keep"), [(0, 3), (30000, 3)])
@pytest.mark.parametrize("path", corpus(WITH_TOOLS, "a transcript with tool calls"))
def test_clear_saves_at_least_what_langchain_saves(path: Path, trigger: int, keep: int) -> None:
    pytest.importorskip("langchain", reason="cannot install langchain here (bench extra)")
    conv = load(path.read_bytes(), str(path)).conversation
    count = COUNTER.count
    theirs = sum(map(count, langchain_clear(conv, count, trigger=trigger, keep=keep)))
    spec = get_stage("clear_tool_results")
    options = spec.options(max_tokens=trigger, keep_rounds=0, keep_results=keep, hint="marker")
    ctx = StageContext(TokenLedger(COUNTER), Preview("ctx-offload"))
    ours = sum(map(count, tool_outputs(spec.fn(conv, options, ctx).conversation)))
    assert ours <= theirs


@pytest.mark.parametrize("path", corpus(CLAUDE_CODE, "a Claude Code session (cc_*)"))
def test_claude_code_preset_beats_cozempic(path: Path) -> None:
    pytest.importorskip("cozempic", reason="cannot install cozempic here")
    raw = path.read_bytes()
    ours = reduce_bytes(raw, config=build_config({"preset": "claude-code-resume"}, "t")).output
    aggressive = cozempic_output(path, "aggressive")
    standard = cozempic_output(path, "standard")
    assert len(ours) < len(aggressive)
    count = COUNTER.count
    assert resume_tokens(ours, path.name, count) < resume_tokens(standard, path.name, count)
