"""Property tests across every format and every stage.

For generated conversations with parallel calls, results split over messages,
repeated ids and errors, in every line-based format and through every registered
stage: reduce raises nothing but documented errors, its output passes validate (no
problem the input did not have), restore(reduce(x)) == x byte-for-byte, and
reduce(reduce(x)) == reduce(x).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.errors import CtxError
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.stages import registry
from support.transcript_builders import FORMATS, build, to_jsonl

# Options that make each stage act on small generated transcripts.
STAGE_OPTIONS: dict[str, dict[str, Any]] = {
    "truncate_tool_output": {"max_chars": 300},
    "clear_tool_results": {"max_tokens": 50, "keep_rounds": 1},
    "head_tail": {
        "threshold_chars": 300,
        "head_chars": 100,
        "tail_chars": 80,
        "keep_recent_results": 1,
    },
    "compress_words": {"recent_calls": 1, "mid_calls": 2, "min_content_words": 10},
    "nudge_early_exit": {"min_model_calls": 1},
    "keep_last": {"keep_messages": 3},
    "strip_tool_calls": {},
    "strip_and_truncate": {"keep_messages": 3},
    "summarize": {"trigger": "always", "keep_messages": 3},
    # Claude Code stages: no-ops on other formats, which the property checks too.
    "prune_sidecars": {},
    "clear_thinking": {},
    "dedupe_outputs": {},
    "drop_before_compaction": {},
    "strip_system_reminders": {},
}
STAGES = sorted(STAGE_OPTIONS)

words = st.sampled_from(
    [
        "error",
        "src/app.py",
        "def",
        "value=3",
        "the",
        "and",
        "漢字",
        "😀",
        "line\n",
        "  indent",
        "<|endoftext|>",
    ]
)
texts = st.lists(words, min_size=0, max_size=120).map(" ".join)
outputs = st.one_of(texts, st.lists(words, min_size=80, max_size=500).map(" ".join))
ids = st.sampled_from(["c1", "c2", "c3", "c4", "dup", "../x"])
tools = st.sampled_from(["run", "read_file", "edit", "grep"])


@st.composite
def conversations(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    turns: list[tuple[Any, ...]] = []
    used = 0
    for _ in range(draw(st.integers(1, 5))):
        turns.append(("user", draw(texts) or "hi"))
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                used += 1
                cid = draw(ids) if draw(st.booleans()) else f"call_{used}"
                calls.append((cid, draw(tools), {"path": draw(texts), "n": used}))
            turns.append(("assistant", draw(st.none() | texts), calls))
            results = [(c, draw(outputs), draw(st.booleans())) for c, _n, _a in calls]
            order = draw(st.permutations(results))
            # Results in one message or split over several (Claude Code, OpenAI).
            split = draw(st.integers(1, len(order)))
            turns.append(("results", order[:split]))
            if order[split:]:
                turns.append(("results", order[split:]))
        if draw(st.booleans()):
            turns.append(("assistant", draw(texts) or "done", []))
    return turns


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_on_every_format(stage: str) -> None:
    assert stage in registry(), f"stage {stage} is no longer registered"
    options = {"use": stage, **STAGE_OPTIONS[stage]}
    config = build_config({"tokenizer": "approx", "stages": [options]}, "property")

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(fmt=st.sampled_from(FORMATS), turns=conversations())
    def check(fmt: str, turns: list[tuple[Any, ...]]) -> None:
        raw = to_jsonl(build(fmt, turns))
        with tempfile.TemporaryDirectory() as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                Path("in.jsonl").write_bytes(raw)
                cfg = config.with_overrides(format=fmt)
                try:
                    _, out = reduce_file("in.jsonl", "out.jsonl", config=cfg)
                except CtxError as exc:  # documented errors only, never a crash
                    pytest.fail(f"{fmt}/{stage}: {exc}")
                assert restore_file("out.jsonl") == raw
                _, again = reduce_file("out.jsonl", "again.jsonl", config=cfg)
                assert again == out, f"{fmt}/{stage}: rerun changed the output"
                before = {(p.kind, p.call_id) for p in validate_bytes(raw, format=fmt)}
                after = {(p.kind, p.call_id) for p in validate_bytes(out, format=fmt)}
                assert after <= before, f"{fmt}/{stage}: new problems {after - before}"
            finally:
                os.chdir(cwd)

    check()
