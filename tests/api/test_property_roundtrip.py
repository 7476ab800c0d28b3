"""Property tests: on generated transcripts, reduce is lossless, idempotent and keeps pairs."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.api import reduce_file, restore_file
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import build_config

texts = st.one_of(
    st.text(max_size=40),
    st.text(
        alphabet=st.sampled_from('ab cd\n\t"\\é漢😀<|endoftext|>{}'), min_size=200, max_size=3000
    ),
)
ids = st.sampled_from(["call_1", "call_2", "call_3", "../../etc/x", "a" * 120, "dup"])


@st.composite
def transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(texts)})
    for _ in range(draw(st.integers(1, 6))):
        msgs.append({"role": "user", "content": draw(texts)})
        for _ in range(draw(st.integers(0, 3))):
            calls = [
                {
                    "id": draw(ids),
                    "type": "function",
                    "function": {
                        "name": draw(st.sampled_from(["grep", "run", "read_file"])),
                        "arguments": json.dumps({"q": draw(texts)}),
                    },
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
            msgs.append(
                {"role": "assistant", "content": draw(st.none() | texts), "tool_calls": calls}
            )
            order = draw(st.permutations(range(len(calls))))
            for i in order:
                msgs.append(
                    {"role": "tool", "tool_call_id": calls[i]["id"], "content": draw(texts)}
                )
        if draw(st.booleans()):
            msgs.append({"role": "assistant", "content": draw(texts)})
    return msgs


def _serialise(
    msgs: list[dict[str, Any]], spaced: bool, ascii_: bool, eol: str, final: bool
) -> bytes:
    seps = (", ", ": ") if spaced else (",", ":")
    lines = [json.dumps(m, separators=seps, ensure_ascii=ascii_) for m in msgs]
    body = eol.join(lines) + (eol if final else "")
    return body.encode("utf-8", "surrogatepass")


configs = st.fixed_dictionaries(
    {
        "max_chars": st.integers(256, 2500),
        "max_tokens": st.integers(0, 3000),
        "keep_rounds": st.integers(0, 3),
        "clear_arguments": st.booleans(),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=transcripts(),
    spaced=st.booleans(),
    ascii_=st.booleans(),
    eol=st.sampled_from(["\n", "\r\n"]),
    final=st.booleans(),
    cfg=configs,
)
def test_reduce_restore_rerun(
    msgs: list[dict[str, Any]],
    spaced: bool,
    ascii_: bool,
    eol: str,
    final: bool,
    cfg: dict[str, Any],
) -> None:
    raw = _serialise(msgs, spaced, ascii_, eol, final)
    config = build_config(
        {
            "tokenizer": "approx",
            "stages": [
                {"use": "truncate_tool_output", "max_chars": cfg["max_chars"]},
                {
                    "use": "clear_tool_results",
                    "max_tokens": cfg["max_tokens"],
                    "keep_rounds": cfg["keep_rounds"],
                    "clear_arguments": cfg["clear_arguments"],
                },
            ],
        },
        "generated",
    )
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            Path("in.jsonl").write_bytes(raw)
            _, out = reduce_file("in.jsonl", "out.jsonl", config=config)
            # Lossless.
            assert restore_file("out.jsonl") == raw
            # Idempotent.
            _, again = reduce_file("out.jsonl", "again.jsonl", config=config)
            assert again == out
            # Pairs kept: no problem the input did not already have.
            before = {(p.kind, p.call_id) for p in validate_bytes(raw)}
            after = {(p.kind, p.call_id) for p in validate_bytes(out)}
            assert after <= before
            # Offloaded files never escape the directory.
            for path in Path("out.jsonl.offload").rglob("*"):
                assert path.resolve().is_relative_to(Path("out.jsonl.offload").resolve())
        finally:
            os.chdir(cwd)
