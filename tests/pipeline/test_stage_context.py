"""One factory builds what a stage gets (issue 40 item 2): a file's run, the live Reducer
and ctxcli.testing.run_stage hand a stage the same services.

The Reducer used to build its own context without them: a stage found the answer cache
(and API access) when reducing a file, and not in the agent loop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxcli import Reducer
from ctxcli.formats import load
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.stages import STAGE_REGISTRY, Conversation, StageContext, StageResult, register
from ctxcli.stages.base import StageOptions
from ctxcli.testing import run_stage

SEEN: list[StageContext] = []
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


class ProbeOptions(StageOptions):
    """No options."""


def _probe(conv: Conversation, opts: ProbeOptions, ctx: StageContext) -> StageResult:
    """Record the context; change nothing."""
    SEEN.append(ctx)
    return StageResult(conv)


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    register("probe_context", options=ProbeOptions)(_probe)
    SEEN.clear()
    yield {"tokenizer": "approx", "language": "zh", "stages": [{"use": "probe_context"}]}
    SEEN.clear()
    STAGE_REGISTRY.reset()


def _services(ctx: StageContext) -> dict[str, Any]:
    answers = ctx.answers
    return {
        "anthropic": ctx.anthropic,
        "answers": None if answers is None else answers.path,
        "classifier": ctx.classifier,
        "summarizer": ctx.summarizer,
        "language": ctx.language,
    }


def test_a_stage_finds_the_same_services_in_a_file_and_in_the_agent_loop(
    probe: dict[str, Any],
) -> None:
    config = build_config(probe, "probe")
    raw = b"".join(json.dumps(m).encode() + b"\n" for m in MESSAGES)
    reduce_bytes(raw, config=config)
    Reducer(config, offload_dir="live-offload").reduce(MESSAGES)
    by_file, live = SEEN
    assert _services(live) == _services(by_file)
    # The answer cache and the key reached both (the key never shows in a repr).
    assert by_file.answers is not None and by_file.anthropic.api_key == "sk-test-not-a-real-key"
    assert "sk-test" not in repr(by_file)


def test_run_stage_hands_the_same_services_but_writes_no_cache(probe: dict[str, Any]) -> None:
    raw = b"".join(json.dumps(m).encode() + b"\n" for m in MESSAGES)
    reduce_bytes(raw, config=build_config(probe, "probe"))
    run_stage("probe_context", load(raw, "t").conversation)
    by_file, tested = SEEN
    assert tested.anthropic == by_file.anthropic
    assert tested.answers is None  # run_stage writes nothing, the answer cache included


def test_no_answer_cache_with_counting_off(probe: dict[str, Any]) -> None:
    from ctxcli.pipeline.options import RunOptions
    from ctxcli.services.tokens.ledger import CountOptions

    raw = b"".join(json.dumps(m).encode() + b"\n" for m in MESSAGES)
    reduce_bytes(
        raw,
        config=build_config(probe, "probe"),
        options=RunOptions(counting=CountOptions(cache=False)),
    )
    (ctx,) = SEEN
    assert ctx.answers is None
