"""ctxcli.testing: each helper passes where ctx keeps its guarantees and fails where a plugin
breaks one (a helper that cannot fail would prove nothing to the plugin author using it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxcli.formats import FORMAT_REGISTRY, load, register_format
from ctxcli.formats.openai_chat import OpenAIChat
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.stages import (
    STAGE_REGISTRY,
    Conversation,
    Kind,
    StageContext,
    StageOptions,
    StageResult,
    register,
)
from ctxcli.store.memory import BlobStore
from ctxcli.testing import (
    assert_dump_restores,
    assert_format_identity,
    assert_golden,
    assert_roundtrip,
    assert_stage_roundtrip,
    run_stage,
)
from support.paths import REPO, SAMPLE, corpus, shared_transcripts

LONG = "x" * 5000
RECORDS = [
    {"role": "user", "content": "Read the log."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": LONG},
]
SMALL = [p for p in shared_transcripts() if p.stat().st_size < 3_000_000][:3]


@pytest.fixture
def scratch_registry() -> Iterator[None]:
    """Stages and formats a test registers are gone after it."""
    yield
    STAGE_REGISTRY.reset()
    FORMAT_REGISTRY.reset()


def _conversation(records: list[Any]) -> Conversation:
    return load(b"".join(json.dumps(r).encode() + b"\n" for r in records), "records").conversation


# --- run_stage -------------------------------------------------------------------------------


def test_run_stage_offloads_what_the_pipeline_offloads() -> None:
    conv = _conversation(RECORDS)
    run = run_stage("truncate_tool_output", conv, max_chars=500)
    assert run.offloaded == {"trunc/call_1": LONG}
    assert "ctx-offload/trunc/call_1" in run.conversation.messages[2].blocks[0].text
    assert len(run.conversation.messages[2].blocks[0].text) <= 500
    config = build_config({"stages": [{"use": "truncate_tool_output", "max_chars": 500}]}, "t")
    store = BlobStore("ctx-offload", cite="name")
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in RECORDS)
    piped = reduce_bytes(raw, config=config, offload=store)
    assert store.texts() == {"trunc/call_1": LONG}
    out = [json.loads(line) for line in piped.output.splitlines()]
    assert out[2]["content"] == run.conversation.messages[2].blocks[0].text


def test_run_stage_validates_options_like_the_config() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        run_stage("truncate_tool_output", _conversation(RECORDS), max_chars=-1)


# --- assert_stage_roundtrip / assert_roundtrip -------------------------------------------------


@pytest.mark.parametrize("stage", ["truncate_tool_output", "clear_tool_results", "keep_last"])
def test_builtin_stages_round_trip_on_the_sample(stage: str) -> None:
    out = assert_stage_roundtrip(stage, SAMPLE)
    assert out != SAMPLE.read_bytes() or stage == "keep_last"


@pytest.mark.slow
@pytest.mark.parametrize("path", corpus(SMALL))
def test_the_default_pipeline_round_trips_real_transcripts(path: Path, tmp_path: Path) -> None:
    out = assert_roundtrip(path, workdir=tmp_path)
    assert len(out) <= path.stat().st_size


class Halve(StageOptions):
    """Options of halve."""


def _halve(conv: Conversation, opts: Halve, ctx: StageContext) -> StageResult:
    """Halve every tool result, every run: not idempotent."""
    messages = [
        m.with_blocks(
            [
                b.with_text(b.text[: len(b.text) // 2]) if b.kind is Kind.TOOL_RESULT else b
                for b in m.blocks
            ]
        )
        for m in conv.messages
    ]
    return StageResult(conv.with_messages(messages))


def _drop_calls(conv: Conversation, opts: Halve, ctx: StageContext) -> StageResult:
    """Drop the tool calls and keep their results: the results are orphaned."""
    messages = [
        m.with_blocks([b for b in m.blocks if b.kind is not Kind.TOOL_CALL]) for m in conv.messages
    ]
    return StageResult(conv.with_messages(messages))


def test_a_stage_that_changes_its_own_output_fails(scratch_registry: None) -> None:
    register("halve", options=Halve)(_halve)
    with pytest.raises(AssertionError, match="reduced twice"):
        assert_stage_roundtrip("halve", SAMPLE)


def test_a_stage_that_orphans_tool_results_fails(scratch_registry: None) -> None:
    register("drop_calls", options=Halve)(_drop_calls)
    with pytest.raises(AssertionError, match="problems the input has not"):
        assert_stage_roundtrip("drop_calls", SAMPLE)


def test_the_format_read_is_checked() -> None:
    with pytest.raises(AssertionError, match="read as 'openai_chat', not 'codex'"):
        assert_roundtrip(SAMPLE, format="codex")


# --- formats -----------------------------------------------------------------------------------


class Lying(OpenAIChat):
    """OpenAI chat, written with bytes its restore script does not describe."""

    name = "lying_chat"
    description = "a format whose dump changes bytes it says it copied"

    def sniff(self, records: Any) -> bool:
        return False

    def dump(self, doc: Any, conv: Any, blobs: Any, **kw: Any) -> Any:
        out, script = super().dump(doc, conv, blobs, **kw)
        return out.replace(b'"role": "user"', b'"role":"user"'), script


def test_builtin_formats_keep_an_untouched_transcript() -> None:
    for sample in ("openai_chat_support.jsonl", "claude_code_session.jsonl", "codex_rollout.jsonl"):
        raw = (REPO / "sample_transcripts" / sample).read_bytes()
        assert assert_format_identity(raw).raw == raw


def test_a_format_that_rewrites_copied_bytes_fails(scratch_registry: None) -> None:
    register_format(Lying)
    raw = SAMPLE.read_bytes()
    with pytest.raises(AssertionError, match="dumped by lying_chat"):
        assert_format_identity(raw, "lying_chat")
    config = build_config({"stages": []}, "test").with_overrides(format="lying_chat")
    with pytest.raises(AssertionError, match="restored"):
        assert_roundtrip(raw, config)


def test_dump_restores_an_edited_conversation(tmp_path: Path) -> None:
    doc = load(SAMPLE.read_bytes(), "sample")
    edited = doc.conversation.with_messages(
        [m.with_blocks([b.with_text("") for b in m.blocks]) for m in doc.conversation.messages]
    )
    out = assert_dump_restores(doc, edited, tmp_path)
    assert out != doc.raw


def test_dump_of_a_lying_format_fails(scratch_registry: None) -> None:
    register_format(Lying)
    doc = load(SAMPLE.read_bytes(), "sample", format="lying_chat")
    with pytest.raises(AssertionError, match="restored"):
        assert_dump_restores(doc, doc.conversation)


def test_golden_compares_writes_and_never_passes_without_a_file(tmp_path: Path) -> None:
    golden = tmp_path / "expected.jsonl"
    with pytest.raises(AssertionError, match="is missing"):
        assert_golden(b"a\n", golden)
    assert_golden(b"a\n", golden, update=True)
    assert_golden(b"a\n", golden)
    with pytest.raises(AssertionError, match="first difference at byte 0"):
        assert_golden(b"b\n", golden)
