"""A Claude Code session is loaded without holding its texts twice (issue 22, memory).

Claude Code keeps, besides what the model sees, copies for its UI: a record's
``toolUseResult`` (stdout, whole files) and the ``progress`` records streamed while a
tool ran. Loaded, those were two thirds of a session's parsed strings, and the same
short values (session id, working directory, version) stood on every line. Now every
long text stays in the input (a ``Span``, read back when needed) and equal short
values are one object. Nothing a user sees may change: these tests load and reduce
real sessions both ways and compare everything that is written.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli.api import Destination, RunOptions, reduce, restore_file
from ctxcli.core.model import LazyBlock, LazyText, hydrate, read_text
from ctxcli.formats import load
from ctxcli.formats.anthropic import CallInput
from ctxcli.formats.claude_code import ClaudeCode
from ctxcli.formats.lazy import LAZY_MIN_CHARS, SHARED_MAX_CHARS, Span, share_strings
from ctxcli.formats.slots import json_text
from ctxcli.pipeline.config import build_config
from support.paths import need_shared

SESSIONS = [
    "cc_spotter_4d5611e5.jsonl",
    "cc_spotter_4d5611e5_subagent_a2898e3.jsonl",
    "cc_mclaude_c76e5be5.jsonl",
]

CHAINS = {
    "resume": build_config({"preset": "claude-code-resume"}, "resume preset"),
    # Every other stage that reads records or texts, with settings that make them act.
    "others": build_config(
        {
            "tokenizer": "approx",
            "stages": [
                {
                    "use": "prune_sidecars",
                    "fields": ["toolUseResult"],
                    "constant_fields": ["cwd", "version", "toolUseResult"],
                    "records": ["file-history-snapshot"],
                },
                {"use": "strip_and_truncate"},
                {"use": "compress_words"},
                {"use": "head_tail"},
                {"use": "keep_last"},
                {"use": "update_usage", "above_share": 0.0},
            ],
        },
        "other stages",
    ),
}


@contextmanager
def eager() -> Iterator[None]:
    """Claude Code loaded the old way: every text a str, every value its own object."""
    ClaudeCode.lazy_texts = False
    ClaudeCode.shares_strings = False
    try:
        yield
    finally:
        ClaudeCode.lazy_texts = True
        ClaudeCode.shares_strings = True


def _record(kind: str, i: int, **fields: Any) -> dict[str, Any]:
    return {
        "parentUuid": f"u{i - 1}" if i else None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/project",
        "sessionId": "3f2b1c9e-7d4a-4e1b-9c0d-2a6f8e5b7c31",
        "version": "2.1.39",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"u{i}",
        "timestamp": f"2026-11-25T10:{i // 60 % 60:02}:{i % 60:02}.000Z",
        **fields,
    }


def _session(outputs: list[str]) -> bytes:
    """A session whose every tool output stands three times, as Claude Code writes it."""
    lines = [_record("user", 0, message={"role": "user", "content": "Fix the build."})]
    for n, out in enumerate(outputs):
        call = f"toolu_{n:04}"
        i = len(lines)
        lines.append(
            _record(
                "assistant",
                i,
                message={
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call,
                            "name": "Bash",
                            "input": {"command": "make"},
                        }
                    ],
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
            )
        )
        lines.append(
            _record(
                "progress",
                i + 1,
                toolUseID=f"bash-progress-{n}",
                parentToolUseID=call,
                data={"type": "bash_progress", "output": out, "fullOutput": out},
            )
        )
        lines.append(
            _record(
                "user",
                i + 2,
                message={
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": out}],
                },
                toolUseResult={"stdout": out, "stderr": "", "interrupted": False},
            )
        )
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def _spans(value: Any) -> int:
    if isinstance(value, LazyText):
        return 1
    if isinstance(value, dict):
        return sum(_spans(v) for v in value.values())
    if isinstance(value, list):
        return sum(_spans(v) for v in value)
    return 0


def test_every_copy_of_a_long_output_stays_in_the_input() -> None:
    outputs = ["x" * 3000, "short", 'é😀"\\\n' * 400]
    raw = _session(outputs)
    doc = load(raw)
    with eager():
        reference = load(raw)
    assert doc.format.name == "claude_code"
    assert doc.conversation == reference.conversation
    for rec, ref in zip(doc.records, reference.records, strict=True):
        assert hydrate(rec.data) == ref.data
    # Two long outputs, each in a tool_result, a toolUseResult and a progress record
    # (output and fullOutput). The progress records, which the model never sees, hold
    # nothing parsed (thin: read again when asked); the message records hold four
    # spans, and no long str is held anywhere.
    thin = [r for r in doc.records if r.is_thin]
    assert [r.data["type"] for r in thin] == ["progress"] * 3
    held = [r.data for r in doc.records if not r.is_thin]
    assert sum(_spans(data) for data in held) == 4
    assert not any(
        isinstance(v, str) and len(v) >= LAZY_MIN_CHARS for data in held for v in _strings(data)
    )
    lazy = [b for m in doc.conversation for b in m.blocks if isinstance(b, LazyBlock)]
    assert [b.text for b in lazy] == [outputs[0], outputs[2]]
    record = doc.records[-1].data
    assert read_text(record["toolUseResult"]["stdout"]) == outputs[2]


def test_a_long_call_input_is_made_again_when_read() -> None:
    raw = _session(["ok"]).replace(b'{"command":"make"}', orjson.dumps({"content": "é" * 3000}))
    doc = load(raw)
    with eager():
        reference = load(raw)
    assert doc.conversation == reference.conversation
    calls = [b for m in doc.conversation for b in m.blocks if b.call_id and b.name == "Bash"]
    assert len(calls) == 1 and isinstance(calls[0], LazyBlock)
    assert isinstance(calls[0].span, CallInput)
    assert calls[0].text == json_text({"content": "é" * 3000})


def test_records_share_the_file_view_and_spans_point_into_it() -> None:
    raw = _session(["x" * 3000, "y" * 2000])
    doc = load(raw)
    assert len({id(rec.source()[0]) for rec in doc.records}) == 1
    assert b"".join(bytes(rec.raw) for rec in doc.records) == raw
    lazy = [b for m in doc.conversation for b in m.blocks if isinstance(b, LazyBlock)]
    spans = [b.span for b in lazy if isinstance(b.span, Span)]
    assert len(spans) == 2
    assert all(raw[s.start : s.end] == orjson.dumps(s.text()) for s in spans)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_equal_short_values_are_one_object_but_timestamps_are_not_kept() -> None:
    doc = load(_session(["a" * 2000] * 3))
    # What the document holds: the progress records are thin (parsed again when read).
    datas = [r.data for r in doc.records if not r.is_thin]
    assert len(datas) == 7
    for field in ("cwd", "sessionId", "version", "gitBranch", "userType"):
        assert len({id(d[field]) for d in datas}) == 1, field
    # The values of the objects a record holds directly are shared too.
    answers = [d["message"] for d in datas if d["type"] == "assistant"]
    assert len({id(m["model"]) for m in answers}) == 1
    # A top-level field named unique is left alone (sharing it would only cost).
    seen: dict[str, str] = {}
    data = {"timestamp": "".join(["2026-", "11"]), "cwd": "".join(["/h", "ome"])}
    share_strings(data, seen, frozenset({"timestamp"}))
    assert list(seen) == ["/home"]
    long = "y" * SHARED_MAX_CHARS
    share_strings({"note": long}, seen, frozenset())
    assert long not in seen


def test_a_loaded_session_holds_none_of_its_long_texts() -> None:
    # 120 distinct 24 KB outputs, each stored three times: 8.6 MB of text.
    outputs = [f"{i:04} " + "compiling module\n" * 1500 for i in range(120)]
    raw = _session(outputs)
    held = _held_after_load(raw)
    with eager():
        eager_held = _held_after_load(raw)
    assert eager_held > 8 * 1024 * 1024
    assert held < 1.5 * 1024 * 1024, f"{held / 2**20:.1f} MiB held after loading"


def _held_after_load(raw: bytes, messages: int = 241) -> int:
    """Bytes allocated and still held once ``raw`` is loaded (the document alive)."""
    tracemalloc.start()
    try:
        doc = load(raw)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(doc.conversation.messages) == messages
    return held


def test_records_the_model_never_sees_are_not_held_parsed() -> None:
    # Progress records are most of a long session's lines (72% of the bench's): each
    # held parsed was a dict of a kilobyte. Thin, each holds its place in the file.
    lines = [_record("user", 0, message={"role": "user", "content": "Fix the build."})]
    lines += [
        _record(
            "progress",
            i,
            toolUseID=f"bash-progress-{i}",
            parentToolUseID="toolu_0000",
            data={"type": "bash_progress", "output": f"line {i}", "elapsedTimeSeconds": i},
        )
        for i in range(1, 3001)
    ]
    raw = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    held = _held_after_load(raw, messages=1)
    with eager():
        eager_held = _held_after_load(raw, messages=1)
    assert held < eager_held / 3, f"{held} bytes held, {eager_held} held parsed"
    doc = load(raw)
    assert all(r.is_thin for r in doc.records[1:]) and not doc.records[0].is_thin
    # Read again, a thin record's data is what the line says, a new object each time.
    assert doc.records[7].data == lines[7]
    assert doc.records[7].data is not doc.records[7].data
    assert doc.conversation.records[7].data == lines[7]


@pytest.mark.parametrize("chain", sorted(CHAINS))
@pytest.mark.parametrize("name", [*SESSIONS, "synthetic"])
def test_lazy_and_eager_runs_write_the_same_and_restore(
    name: str, chain: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if name == "synthetic":
        raw = _session([f"{i} " + "ok\n" * (400 * i) for i in range(12)])
    else:
        raw = (need_shared() / name).read_bytes()
    src = tmp_path / "in.jsonl"
    src.write_bytes(raw)
    runs = []
    # Hints cite absolute paths; both runs cite the same relative one to compare bytes.
    dest = Destination("out.jsonl", cite_as="out.jsonl.offload")
    options = RunOptions(on_invalid="keep")
    for where in ("lazy", "eager"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        with eager() if where == "eager" else nullcontext():
            done = reduce(src, dest, config=CHAINS[chain], options=options)
        runs.append((done.report, done.output))
    (lazy_report, lazy_out), (eager_report, eager_out) = runs
    assert lazy_out == eager_out
    assert lazy_report.to_dict() == eager_report.to_dict()
    assert _tree(tmp_path / "lazy/out.jsonl.offload") == _tree(tmp_path / "eager/out.jsonl.offload")
    assert lazy_out != raw
    monkeypatch.chdir(tmp_path / "lazy")
    assert restore_file("out.jsonl") == raw


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but the manifest (it names its run's time)."""
    files = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }
    assert files, root
    return files
