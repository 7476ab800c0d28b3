"""Property: the message-dropping stages never orphan a tool call or result.

Generated transcripts have parallel calls (several in one assistant message), their
results in one or several messages and in any order, ids reused across turns,
calls left unanswered, results answering nothing and results given twice. For each
stage and a few sizes: the output has no pairing problem the input did not have,
``ctx restore`` gives back the input byte for byte, and reducing the output again
changes nothing.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.api import reduce_bytes, reduce_file, restore_file
from ctxcli.formats import load, registry
from ctxcli.formats.validate import check_document
from ctxcli.pipeline.config import build_config

WORDS = ["alpha", "beta", "gamma", "delta", "error:", "src/app.py", "exit", "ok", "的"]
IDS = ["call_1", "call_2", "call_3", "toolu_a", "x"]


@st.composite
def _text(draw: st.DrawFn, *, min_words: int = 1, max_words: int = 12) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=min_words, max_size=max_words)))


@st.composite
def _turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A format-neutral transcript: a list of turns."""
    turns: list[dict[str, Any]] = []
    if draw(st.booleans()):
        turns.append({"kind": "system", "text": draw(_text())})
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "tools"]))
        if kind != "tools":
            turns.append({"kind": kind, "text": draw(_text())})
            continue
        count = draw(st.integers(1, 3))
        # Ids repeat across turns (tau-bench reuses one id throughout).
        ids = [draw(st.sampled_from(IDS)) for _ in range(count)]
        calls = [
            {"id": cid, "name": draw(st.sampled_from(["bash", "read_file"])), "cmd": draw(_text())}
            for cid in ids
        ]
        answered = draw(st.permutations(list(range(count))))
        # Now and then a call stays unanswered or a result is given twice.
        if draw(st.integers(0, 9)) == 0:
            answered = answered[:-1]
        if answered and draw(st.integers(0, 9)) == 0:
            answered = [*answered, answered[0]]
        results = [{"id": ids[i], "text": draw(_text(min_words=5, max_words=60))} for i in answered]
        if draw(st.integers(0, 14)) == 0:
            results.append({"id": "orphan", "text": "answers nothing"})
        # Results go into one or several messages (one each in OpenAI chat).
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(results) - 1)), max_size=2)))
        groups = [results[a:b] for a, b in zip([0, *cuts], [*cuts, len(results)], strict=True)]
        turns.append(
            {
                "kind": "tools",
                "text": draw(st.one_of(st.none(), _text())),
                "calls": calls,
                "groups": [g for g in groups if g],
                "trailing": draw(st.one_of(st.none(), _text())),
            }
        )
    return turns


def _openai(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for turn in turns:
        if turn["kind"] != "tools":
            records.append({"role": turn["kind"], "content": turn["text"]})
            continue
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps({"command": c["cmd"]})},
            }
            for c in turn["calls"]
        ]
        records.append({"role": "assistant", "content": turn["text"], "tool_calls": calls})
        for group in turn["groups"]:
            for r in group:
                records.append({"role": "tool", "tool_call_id": r["id"], "content": r["text"]})
        if turn["trailing"]:
            records.append({"role": "user", "content": turn["trailing"]})
    return records


def _anthropic(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for turn in turns:
        if turn["kind"] == "system":
            continue  # the Messages API has no system turn
        if turn["kind"] != "tools":
            records.append({"role": turn["kind"], "content": turn["text"]})
            continue
        content: list[dict[str, Any]] = []
        if turn["text"]:
            content.append({"type": "text", "text": turn["text"]})
        content += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {"command": c["cmd"]}}
            for c in turn["calls"]
        ]
        records.append({"role": "assistant", "content": content})
        for i, group in enumerate(turn["groups"]):
            blocks: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": r["id"], "content": r["text"]} for r in group
            ]
            # A results turn may also carry what the user typed meanwhile.
            if turn["trailing"] and i == len(turn["groups"]) - 1:
                blocks.append({"type": "text", "text": turn["trailing"]})
            records.append({"role": "user", "content": blocks})
    if not any(isinstance(r["content"], list) for r in records):
        # Plain text alone reads as OpenAI chat; a thinking block makes it Anthropic.
        thinking = {"type": "thinking", "thinking": "done", "signature": "sig"}
        records.append({"role": "assistant", "content": [thinking]})
    return records


BUILDERS = {"openai_chat": _openai, "anthropic": _anthropic}

CONFIGS: list[tuple[str, list[dict[str, Any]]]] = [
    (f"keep_last-{n}", [{"use": "keep_last", "keep_messages": n}]) for n in (1, 2, 5)
] + [
    ("keep_last-user", [{"use": "keep_last", "keep_messages": 2, "start_on_user": True}]),
    ("strip_tool_calls", [{"use": "strip_tool_calls"}]),
    ("strip_tool_calls-rounds", [{"use": "strip_tool_calls", "keep_last_rounds": 2}]),
    ("strip_tool_calls-tools", [{"use": "strip_tool_calls", "keep_tools": ["bash"]}]),
    ("strip_and_truncate-1", [{"use": "strip_and_truncate", "keep_messages": 1}]),
    (
        "strip_and_truncate-3",
        [{"use": "strip_and_truncate", "keep_messages": 3, "keep_last_rounds": 1}],
    ),
    *(
        (f"summarize-{n}", [{"use": "summarize", "trigger": "always", "keep_messages": n}])
        for n in (0, 1, 3)
    ),
    ("summarize-tokens", [{"use": "summarize", "max_tokens": 60, "keep_tokens": 20}]),
    (
        "strip-then-summarize",
        [
            {"use": "strip_tool_calls", "keep_last_rounds": 1},
            {"use": "summarize", "trigger": "always", "keep_messages": 2},
        ],
    ),
]


def _problems(raw: bytes) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.call_id) for p in check_document(load(raw, "t")))


@pytest.mark.parametrize("fmt", sorted(BUILDERS))
@pytest.mark.parametrize(("label", "stages"), CONFIGS, ids=[c[0] for c in CONFIGS])
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(turns=_turns())
def test_no_orphans_lossless_and_idempotent(
    fmt: str, label: str, stages: list[dict[str, Any]], turns: list[dict[str, Any]]
) -> None:
    assert fmt in registry(), f"format {fmt} is no longer registered"
    records = BUILDERS[fmt](turns)
    raw = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)
    assert load(raw, "t").format.name == fmt
    config = build_config({"tokenizer": "approx", "stages": stages}, label)
    with tempfile.TemporaryDirectory() as tmp:
        off = Path(tmp) / "off"
        _, out = reduce_file("in.jsonl", config=config, offload_dir=off, raw=raw)
        # Lossless: the offload directory rebuilds the input exactly.
        assert restore_file("out.jsonl", offload_dir=off, raw=out) == raw
        # No orphan the input did not already have.
        before, after = _problems(raw), _problems(out)
        assert after - before == Counter(), (after - before, out.decode())
    # Idempotent (a dry run: nothing to keep on disk this time).
    assert reduce_bytes(out, config=config).output == out
