"""The reducer on real transcripts fed as growing conversations, cut at random points."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli import Reducer
from ctxcli.agent.reducer import _FORMATS
from ctxcli.formats.validate import check_document
from ctxcli.pipeline.config import build_config
from support.paths import need_shared


def _lines(name: str) -> list[Any]:
    path = need_shared() / name
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _codex_items(name: str) -> list[Any]:
    """A Codex rollout's Responses items: what the Agents SDK or Codex sends the model."""
    return [r["payload"] for r in _lines(name) if r.get("type") == "response_item"]


pytestmark = pytest.mark.real_data

CASES = {
    "anthropic": lambda: _lines("anthropic_derived_from_cc_mclaude_3cfce0ff.jsonl"),
    "openai_chat": lambda: _lines("oai_taubench_airline_task2_trial1.jsonl"),
    "openai_responses": lambda: _codex_items("codex_agentcmd_2025-09-24T19-22-20.jsonl"),
}


def problems(api: str, records: list[Any]) -> set[tuple[str, str | None]]:
    """Pairing problems of a message list (by kind and call id)."""
    fmt = _FORMATS[api]
    doc = fmt.assemble(b"", "x", [fmt.record_from_data(r, i, "x") for i, r in enumerate(records)])
    return {(p.kind, p.call_id) for p in check_document(doc)}


def chain(budget: int) -> Any:
    return build_config(
        {
            "tokenizer": "approx",
            "stages": [
                {"use": "truncate_tool_output", "max_chars": 2000},
                {"use": "clear_tool_results", "max_tokens": budget, "keep_rounds": 1},
            ],
        },
        "test",
    )


@pytest.mark.parametrize("api", sorted(CASES))
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_growing_real_transcript(api: str, tmp_path: Path, data: st.DataObject) -> None:
    records = CASES[api]()
    cuts = sorted(
        data.draw(
            st.lists(st.integers(1, len(records)), min_size=1, max_size=8, unique=True),
            label="cuts",
        )
    )
    budget = data.draw(st.sampled_from([2_000, 8_000, 40_000]), label="budget")
    reducer = Reducer(chain(budget), offload_dir=tmp_path / f"off-{budget}", api=api)
    cleared: dict[int, str] = {}
    previous: list[Any] = []
    for n in cuts:
        out = reducer.reduce(records[:n])
        assert len(out.messages) == n
        # The reducer never adds a pairing problem the input does not have.
        assert problems(api, out.messages) <= problems(api, records[:n])
        for i, msg in enumerate(out.messages):
            text = json.dumps(msg, sort_keys=True)
            if i in cleared:
                assert text == cleared[i]  # cleared once, the same bytes ever after
            elif "[ctx cleared" in text:
                cleared[i] = text
        if out.changed_prefix_at is None:
            assert out.messages[: len(previous)] == previous
        previous = out.messages
    again = reducer.reduce(records[: cuts[-1]])
    assert again.changed_prefix_at is None and again.offloaded == []
    assert again.messages == previous


@pytest.mark.parametrize("api", sorted(CASES))
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_truncation_alone_matches_a_full_run(api: str, tmp_path: Path, data: st.DataObject) -> None:
    """With per-message stages only, the history's arrival in pieces changes nothing."""
    records = CASES[api]()
    cuts = data.draw(st.lists(st.integers(1, len(records)), max_size=6, unique=True), label="cuts")
    config = build_config(
        {"tokenizer": "approx", "stages": [{"use": "truncate_tool_output", "max_chars": 1000}]},
        "test",
    )
    full = Reducer(config, offload_dir=tmp_path / "off", api=api).reduce(records).messages
    growing = Reducer(config, offload_dir=tmp_path / "off", api=api)
    for n in sorted(cuts):
        growing.reduce(records[:n])
    assert growing.reduce(records).messages == full
