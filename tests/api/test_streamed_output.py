"""An output file is written as it is made, never held whole (issue 22, memory).

``reduce(..., Destination(FILE, stream=True))`` (what ``ctx reduce -o FILE`` and ``ctx batch``
do) hands the format's dump the staged output file: the output never exists in memory
beside the parsed input. It must be the very output a held run writes, with the same
manifest, and restore.
"""

from __future__ import annotations

import io
import json
import os
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from support.bench.gen_transcript import generate

import ctxcli.formats.format as format_module
import ctxcli.formats.lines as lines_module
from ctxcli.api import Destination, reduce, restore_file
from ctxcli.formats.format import Format
from ctxcli.formats.openai_chat import OpenAIChat
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.store.naming import Preview
from support.paths import need_shared

CHAIN = build_config(
    {
        "tokenizer": "approx",
        "stages": [
            {"use": "truncate_tool_output", "max_chars": 1500},
            {"use": "clear_tool_results", "max_tokens": 3000, "keep_rounds": 1},
        ],
    },
    "streamed output",
)
NOTHING = build_config({"tokenizer": "approx", "stages": []}, "no stage")

INPUTS = [
    "synthetic",
    "cc_spotter_4d5611e5.jsonl",  # Claude Code: lazy texts, shared strings
    "oai_taubench_airline_task2_trial1.jsonl",
    "minisweagent_sqlfluff-1733_deepseek-chat.traj.json",  # a JSON document
]


def _input(name: str) -> bytes:
    if name == "synthetic":
        return generate(1024 * 1024, seed=3)
    return (need_shared() / name).read_bytes()


def _run(tmp: Path, where: str, raw: bytes, suffix: str, stream: bool) -> tuple[Any, bytes, Path]:
    # The same relative output name in each directory: texts cite their offload dir.
    (tmp / where).mkdir()
    src = tmp / where / f"in{suffix}"
    src.write_bytes(raw)
    cwd = Path.cwd()
    try:
        os.chdir(tmp / where)
        # Compared across two directories: both cite one relative offload path.
        dest = Destination(f"out{suffix}", stream=stream, cite_as=f"out{suffix}.offload")
        done = reduce(src.name, dest, config=CHAIN)
        report, out = done.report, done.output
    finally:
        os.chdir(cwd)
    return report, out, tmp / where


@pytest.mark.parametrize("name", INPUTS)
def test_a_streamed_output_is_the_held_one_and_restores(name: str, tmp_path: Path) -> None:
    raw = _input(name)
    suffix = Path(name).suffix if name != "synthetic" else ".jsonl"
    report, out, streamed = _run(tmp_path, "streamed", raw, suffix, stream=True)
    held_report, held_out, held = _run(tmp_path, "held", raw, suffix, stream=False)
    assert out == b""
    written = (streamed / f"out{suffix}").read_bytes()
    assert written == held_out == (held / f"out{suffix}").read_bytes()
    assert written != raw
    assert report.to_dict() == held_report.to_dict()
    manifest = json.loads((streamed / f"out{suffix}.offload/manifest.json").read_bytes())
    held_manifest = json.loads((held / f"out{suffix}.offload/manifest.json").read_bytes())
    assert manifest["output"] == held_manifest["output"]
    assert manifest["output"]["bytes"] == len(written)
    assert restore_file(str(streamed / f"out{suffix}")) == raw
    assert not list(streamed.glob(".*ctx-tmp*"))  # no staged file left behind


def test_the_output_is_never_held_whole(tmp_path: Path) -> None:
    # Nothing to reduce: a held run joins a copy of every line, 16 MB.
    raw = generate(16 * 1024 * 1024, seed=5)
    src = tmp_path / "in.jsonl"
    src.write_bytes(raw)
    peaks = []
    for n, stream in enumerate((True, False)):
        tracemalloc.start()
        try:
            reduce(src, Destination(str(tmp_path / f"out{n}.jsonl"), stream=stream), config=NOTHING)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert (tmp_path / "out0.jsonl").read_bytes() == raw == (tmp_path / "out1.jsonl").read_bytes()
    streamed, held = peaks
    assert held - streamed > 0.8 * len(raw), (streamed, held)


def test_a_format_whose_dump_takes_no_file_is_written_by_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def dump(self: Format, doc: Any, conv: Any, blobs: Any, *, start: int = 0) -> Any:
        return Format.dump(self, doc, conv, blobs, start=start)  # a plugin's own dump

    raw = generate(256 * 1024, seed=9)
    held = reduce_bytes(raw, config=CHAIN)
    monkeypatch.setattr(OpenAIChat, "dump", dump)
    into = io.BytesIO()
    streamed = reduce_bytes(raw, config=CHAIN, into=into)
    assert streamed.output == b""
    assert into.getvalue() == held.output != raw
    assert streamed.written is not None
    assert streamed.written.size == len(held.output) == streamed.report.bytes_after


def test_changed_records_go_out_as_they_are_made(monkeypatch: pytest.MonkeyPatch) -> None:
    # Most of the output is changed records, whose new bytes must not wait for the end
    # of the dump (a relinked Claude Code session's were 100 MB of a 1 GB run's peak).
    # They go out every RELEASE_BYTES: 64 KB here, so a small input shows it.
    monkeypatch.setattr(format_module, "RELEASE_BYTES", 64 * 1024)
    monkeypatch.setattr(lines_module, "RELEASE_BYTES", 64 * 1024)
    raw = generate(8 * 1024 * 1024, seed=11)
    config = build_config(
        {"tokenizer": "approx", "stages": [{"use": "truncate_tool_output", "max_chars": 2000}]},
        "cut every long result",
    )
    events: list[str] = []

    class Sink(Preview):
        def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
            events.append("original")
            return super().add_original(raw, texts)

    class Into(io.BytesIO):
        def write(self, data: Any) -> int:
            events.append("write")
            return super().write(data)

    held = reduce_bytes(raw, config=config, offload=Preview("off")).output
    into = Into()
    reduce_bytes(raw, config=config, offload=Sink("off"), into=into)
    assert into.getvalue() == held != raw
    last_original = len(events) - 1 - events[::-1].index("original")
    assert events.count("original") > 300
    # Most of the output was out before the last original was packed.
    assert events[:last_original].count("write") > events.count("write") // 2
