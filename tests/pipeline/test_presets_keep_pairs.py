"""Every preset keeps tool calls and results paired, in every format (issue 41 item 7).

The README promises that no stage leaves a call without its result or a result without
its call. Property: for generated conversations in every line format (OpenHands events
included) and for every shipped preset, ``ctx validate`` finds no problem in the output
that it did not find in the input, so an output validates wherever its input does. A
real-shaped OpenHands ``output.jsonl`` (several instances) is checked the same way, per
preset, through the CLI the issue used.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.api import reduce_bytes
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import load_config
from ctxcli.pipeline.presets import preset_names
from support.cli import invoke
from support.openhands import output_jsonl
from support.transcript_builders import FORMATS, build, to_jsonl

PRESETS = sorted(preset_names())

words = st.sampled_from(["error", "src/app.py", "def", "the", "and", "漢字", "line\n", "ok"])
texts = st.lists(words, min_size=0, max_size=40).map(" ".join)
outputs = st.one_of(texts, st.lists(words, min_size=200, max_size=900).map(" ".join))


@st.composite
def conversations(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Users, assistant turns with 0-3 parallel calls (ids reused now and then), results
    in one or two messages, an unanswered final call sometimes."""
    turns: list[tuple[Any, ...]] = []
    used = 0
    for _ in range(draw(st.integers(1, 6))):
        turns.append(("user", draw(texts) or "hi"))
        for _ in range(draw(st.integers(0, 4))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                used += 1
                cid = "dup" if draw(st.integers(0, 5)) == 0 else f"call_{used}"
                calls.append((cid, draw(st.sampled_from(["run", "read", "think"])), {"n": used}))
            turns.append(("assistant", draw(st.none() | texts), calls))
            results = [(c, draw(outputs), draw(st.booleans())) for c, _n, _a in calls]
            split = draw(st.integers(1, len(results)))
            turns.append(("results", results[:split]))
            if results[split:]:
                turns.append(("results", results[split:]))
        if draw(st.booleans()):
            turns.append(("assistant", draw(texts) or "done", []))
    if draw(st.integers(0, 4)) == 0:
        turns.append(("assistant", None, [("call_last", "run", {"n": 0})]))
    return turns


def _problems(raw: bytes, fmt: str | None = None) -> Counter[tuple[str, str | None]]:
    found = validate_bytes(raw, format=fmt or "auto", on_invalid="keep")
    return Counter((p.kind, p.call_id) for p in found)


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_keeps_pairs_in_every_format(preset: str) -> None:
    config = load_config(preset=preset).with_overrides(tokenizer="approx")

    @settings(max_examples=12, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(fmt=st.sampled_from(FORMATS), turns=conversations())
    def check(fmt: str, turns: list[tuple[Any, ...]]) -> None:
        raw = to_jsonl(build(fmt, turns))
        out = reduce_bytes(raw, config=config.with_overrides(format=fmt)).output
        new = _problems(out, fmt) - _problems(raw, fmt)
        assert new == Counter(), f"{preset} on {fmt}: {dict(new)}"

    check()


@pytest.fixture(scope="module")
def openhands_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("openhands") / "output.jsonl"
    path.write_bytes(output_jsonl(instances=3))
    return path


def test_the_openhands_output_is_valid_as_made(openhands_output: Path) -> None:
    assert validate_bytes(openhands_output.read_bytes()) == []


@pytest.mark.parametrize("preset", [*PRESETS, "strip_tool_calls"])
def test_no_preset_orphans_a_call_of_an_openhands_run(
    preset: str, openhands_output: Path, tmp_path: Path
) -> None:
    if preset == "strip_tool_calls":
        config = tmp_path / "strip.toml"
        config.write_text('[[stages]]\nuse = "strip_tool_calls"\n')
        chosen = ["-c", str(config)]
    else:
        chosen = ["--preset", preset]
    out = tmp_path / "out.jsonl"
    invoke(["reduce", str(openhands_output), "-o", str(out), "-q", "--tokenizer", "approx",
            *chosen])  # fmt: skip
    invoke(["validate", str(out)])
    assert invoke(["restore", str(out)]).stdout_bytes == openhands_output.read_bytes()


def test_a_format_that_cannot_write_a_removed_call_refuses() -> None:
    """The guard behind the fix: a format whose ``apply`` keeps a call the stage removed
    (OpenHands did) makes the run fail, instead of writing an orphan."""
    from ctxcli.core.errors import TranscriptError
    from ctxcli.core.model import Kind
    from ctxcli.formats import Format
    from ctxcli.formats.openhands import OpenHandsEvents

    class KeepsCalls(OpenHandsEvents):
        name = "keeps_calls"

        def apply(self, data: Any, old: Any, new: Any) -> Any:
            return Format.apply(self, data, old, new)  # the call stays in the event

    turns = [("user", "go"), ("assistant", "thinking aloud", [("c1", "run", {"n": 1})]),
             ("results", [("c1", "out", False)]), ("assistant", "done", [])]  # fmt: skip
    raw = to_jsonl(build("openhands", turns))
    for fmt in (OpenHandsEvents(), KeepsCalls()):
        doc = fmt.load(raw, "t.jsonl")
        conv = doc.conversation
        kept = []
        for msg in conv.messages:
            if any(b.kind is Kind.TOOL_RESULT for b in msg.blocks):
                continue  # the result goes with its call
            blocks = [b for b in msg.blocks if b.kind is not Kind.TOOL_CALL]
            kept.append(msg.with_blocks(blocks) if len(blocks) != len(msg.blocks) else msg)
        after = conv.with_messages(kept)
        if isinstance(fmt, KeepsCalls):
            with pytest.raises(TranscriptError, match="cannot remove tool call 'c1'"):
                fmt.plan(doc, after)
        else:
            fmt.plan(doc, after)  # the fixed format writes an agent message instead
