"""Long texts stay in the input until a stage reads them (issue 22, the streaming core).

A format with ``lazy_texts`` (OpenAI chat) leaves every string-field text of 1,024
characters or more in the file: its block is a ``LazyBlock`` and the record's parsed
data holds a ``Span`` where the text was. Nothing a user sees may change: these tests
load and reduce the same transcripts with the feature on and off and compare texts,
outputs, restore scripts and reports, and restore the output of a lazy run.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.bench.gen_transcript import generate

from ctxcli.api import Destination, reduce, restore_file
from ctxcli.core.model import Block, LazyBlock
from ctxcli.core.monitors import conversation_monitors
from ctxcli.formats import load
from ctxcli.formats.lazy import LAZY_MIN_CHARS, Span
from ctxcli.formats.openai_chat import OpenAIChat
from ctxcli.formats.slots import get_in
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.services.tokens.bulk import CachedCounter
from ctxcli.services.tokens.ledger import conversation_sources, conversation_texts
from support.paths import need_shared

CHAIN = build_config(
    {
        "tokenizer": "approx",
        "stages": [
            {"use": "truncate_tool_output", "max_chars": 1500},
            {"use": "clear_tool_results", "max_tokens": 3000, "keep_rounds": 1},
        ],
    },
    "lazy texts",
)


@contextmanager
def eager() -> Iterator[None]:
    """OpenAI chat loaded the old way: every text a str."""
    OpenAIChat.lazy_texts = False
    try:
        yield
    finally:
        OpenAIChat.lazy_texts = True


def _transcript(outputs: list[str], dumps: Any = orjson.dumps) -> bytes:
    lines: list[Any] = [
        {"role": "system", "content": "You are a coding agent. " * 60},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for i, out in enumerate(outputs):
        args = json.dumps({"cmd": f"cat part{i}.log", "note": out[:1100]})
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "sh", "arguments": args},
                    }
                ],
            }
        )
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    lines.append({"role": "assistant", "content": "Done."})
    return b"".join(bytes(dumps(line)) + b"\n" for line in lines)


def test_long_texts_are_left_in_the_input_and_read_back_equal() -> None:
    raw = _transcript(["x" * 3000, "short", 'é😀"\\\n' * 400])
    doc = load(raw)
    with eager():
        reference = load(raw)
    assert doc.conversation == reference.conversation
    blocks = [b for m in doc.conversation for b in m.blocks]
    lazy = [b for b in blocks if isinstance(b, LazyBlock)]
    # The long system prompt, both long outputs and both long argument texts.
    assert len(lazy) == 5
    assert all(len(b.text) >= LAZY_MIN_CHARS for b in lazy)
    assert all(type(b) is Block for b in blocks if len(b.text) < LAZY_MIN_CHARS)
    for block in lazy:
        rec = doc.records[next(m.key for m in doc.conversation if block in m.blocks)]
        assert isinstance(get_in(rec.data, block.slot[0]), Span)
    assert all(type(b) is Block for m in reference.conversation for b in m.blocks)


def test_a_text_escaped_another_way_stays_a_string() -> None:
    # Python's json.dumps escapes non-ASCII: orjson's literal is not in the line.
    raw = _transcript(["é" * 2000, "a" * 2000], dumps=lambda v: json.dumps(v).encode())
    blocks = {b.text[:1]: b for m in load(raw).conversation for b in m.blocks if b.text}
    assert type(blocks["é"]) is Block
    assert isinstance(blocks["a"], LazyBlock)


_piece = st.text(
    alphabet=st.sampled_from('ab \n\t"\\/é中😀\x00\x1f\u2028'), min_size=1, max_size=30
)
_long = st.builds(lambda piece, n: piece * n, _piece, st.integers(1, 120))


@settings(max_examples=60, deadline=None)
@given(
    outputs=st.lists(_long, min_size=1, max_size=6),
    ascii_lines=st.booleans(),
)
def test_lazy_and_eager_runs_write_the_same(outputs: list[str], ascii_lines: bool) -> None:
    dumps = (lambda v: json.dumps(v).encode()) if ascii_lines else orjson.dumps
    raw = _transcript(outputs, dumps)
    lazy = reduce_bytes(raw, config=CHAIN)
    with eager():
        reference = reduce_bytes(raw, config=CHAIN)
    assert lazy.output == reference.output
    assert lazy.script == reference.script
    assert lazy.report.to_dict() == reference.report.to_dict()


@pytest.mark.parametrize(
    "name", ["oai_taubench_airline_task2_trial1.jsonl", "synthetic"], ids=["taubench", "synth"]
)
def test_a_lazy_run_restores_and_matches_an_eager_one(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if name == "synthetic":
        raw = generate(2 * 1024 * 1024, seed=7)
    else:
        raw = (need_shared() / name).read_bytes()
    src = tmp_path / "in.jsonl"
    src.write_bytes(raw)
    runs = []
    # Hints cite absolute paths; both runs cite the same relative one to compare bytes.
    dest = Destination("out.jsonl", cite_as="out.jsonl.offload")
    for where in ("lazy", "eager"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        with eager() if where == "eager" else nullcontext():
            done = reduce(src, dest, config=CHAIN)
        runs.append((done.report, done.output))
    (lazy_report, lazy_out), (eager_report, eager_out) = runs
    assert lazy_out == eager_out
    assert lazy_report.to_dict() == eager_report.to_dict()
    assert (tmp_path / "lazy/out.jsonl.offload/originals.bin").read_bytes() == (
        tmp_path / "eager/out.jsonl.offload/originals.bin"
    ).read_bytes()
    monkeypatch.chdir(tmp_path / "lazy")
    assert restore_file("out.jsonl") == raw


@pytest.mark.parametrize("workers", [1, 2], ids=["here", "workers"])
def test_counting_a_lazy_transcript_never_holds_its_texts_at_once(workers: int) -> None:
    # 200 distinct 64 KB outputs: 13 MB of text, read one span at a time to be counted.
    outputs = [f"{i:05} " + "line of build output\n" * 3200 for i in range(200)]
    doc = load(_transcript(outputs))
    with eager():
        texts = list(conversation_texts(load(_transcript(outputs)).conversation))
    counter = CachedCounter(
        "words", lambda t: len(t.split()), workers=workers, parallel_min_bytes=0
    )
    tracemalloc.start()
    try:
        counter.count_many(conversation_sources(doc.conversation))
        counts = [counter.count(t) for t in conversation_texts(doc.conversation)]
        counter.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        counter.close()
    assert counts == [len(t.split()) for t in texts]
    assert counter.counted == len(set(texts))
    assert peak < 3 * 1024 * 1024, f"{peak / 2**20:.1f} MiB held while counting 13 MiB"


def test_the_monitors_of_a_lazy_transcript_read_one_observation_at_a_time() -> None:
    outputs = [
        f"Error: build {i} failed\n" + "compiling module\n" * 4000 + "error: linker failed\n"
        for i in range(200)
    ]
    raw = _transcript(outputs)
    with eager():
        expected = conversation_monitors(load(raw).conversation)
    doc = load(raw)
    tracemalloc.start()
    try:
        scores = conversation_monitors(doc.conversation)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scores == expected and scores["test_repeat"] > 0
    assert peak < 3 * 1024 * 1024, f"{peak / 2**20:.1f} MiB held for 13 MiB of results"
