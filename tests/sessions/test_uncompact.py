"""ctx uncompact: the conversation from before a compaction back, restored byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli import api
from ctxcli.formats.claude_code import resume_chain
from ctxcli.sessions import fix_in_place
from ctxcli.sessions.uncompact import plan_uncompact, uncompact
from ctxcli.store.snapshots import take_snapshot
from support.cli import invoke
from support.paths import REPO, SHARED, need_shared

SUMMARY = "This session is being continued from a previous conversation that ran out of context."
SAMPLE = REPO / "sample_transcripts" / "claude_code_session.jsonl"


def _cc(kind: str, uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/work/p",
        "sessionId": "5e0f0c1d-2b3a-4c5d-8e9f-0a1b2c3d4e5f",
        "version": "2.1.39",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-02-12T20:30:28.504Z",
    }
    if kind == "assistant":
        record["message"] = {
            "id": f"msg_{uuid}",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": content}],
        }
    elif kind == "user":
        record["message"] = {"role": "user", "content": content}
    record.update(extra)
    return record


def _turns(start: int, count: int, parent: str | None, text: str = "") -> list[dict[str, Any]]:
    out = []
    for n in range(start, start + count):
        out.append(_cc("user", f"u{n}", parent, f"prompt {n}: {text}"))
        out.append(_cc("assistant", f"a{n}", f"u{n}", f"answer {n}: {text}"))
        parent = f"a{n}"
    return out


def _lines(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def session_2x(pre: int = 3, post: int = 2, text: str = "") -> bytes:
    """A Claude Code 2.x session compacted once: boundary, summary, then more turns."""
    records = _turns(0, pre, None, text)
    boundary = _cc("system", "b0", None, None, subtype="compact_boundary")
    boundary.update(content="Conversation compacted", logicalParentUuid=f"a{pre - 1}")
    summary = _cc("user", "s0", "b0", SUMMARY + " Summary.", isCompactSummary=True)
    return _lines([*records, boundary, summary, *_turns(pre, post, "s0", text)])


def session_10x() -> bytes:
    """A Claude Code 1.0.x session: the summary restarts the chain (parentUuid null)."""
    summary = _cc("user", "s0", None, SUMMARY + " Summary.", isCompactSummary=True)
    return _lines([*_turns(0, 3, None), summary, *_turns(3, 2, "s0")])


def _codex(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-09-24T19:22:20.000Z", "type": kind, "payload": payload}


def _msg(role: str, text: str) -> dict[str, Any]:
    part = "input_text" if role == "user" else "output_text"
    return _codex(
        "response_item",
        {"type": "message", "role": role, "content": [{"type": part, "text": text}]},
    )


CODEX_META = _codex(
    "session_meta",
    {"id": "01997e76-d124-7592-9cac-2ec05abbca08", "cwd": "/work/p", "cli_version": "0.169.0"},
)


def rollout(pre: int = 3, post: int = 2) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A Codex rollout's records before and after (and including) a compaction."""
    before = [CODEX_META]
    for n in range(pre):
        before += [_msg("user", f"prompt {n}"), _msg("assistant", f"answer {n}")]
    after = [_codex("compacted", {"message": SUMMARY + " Summary."})]
    for n in range(pre, pre + post):
        after += [_msg("user", f"prompt {n}"), _msg("assistant", f"answer {n}")]
    return before, after


def _datas(raw: bytes) -> list[Any]:
    return [orjson.loads(line) for line in raw.splitlines()]


def _chain_texts(raw: bytes) -> list[str]:
    datas = _datas(raw)
    texts = []
    for k in resume_chain(datas):
        message = datas[k].get("message")
        if isinstance(message, dict):
            content = message["content"]
            texts.append(content if isinstance(content, str) else content[0].get("text", ""))
    return texts


def _write(tmp_path: Path, raw: bytes, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize("make", [session_2x, session_10x], ids=["2.x", "1.0.x"])
def test_claude_code_chain_walks_from_the_last_record_to_the_first(make: Any) -> None:
    raw = make()
    plan = plan_uncompact(raw, lambda unit: ["o", len(unit)])
    assert plan.agent == "claude_code" and len(plan.compactions) == 1
    texts = _chain_texts(plan.output)
    assert texts == [f"{kind} {n}: " for n in range(5) for kind in ("prompt", "answer")]
    assert SUMMARY not in plan.output.decode()
    # Before: a resume sent the summary and the two turns after it only.
    assert _chain_texts(raw)[0].startswith(SUMMARY)


def test_uncompact_to_a_file_restores_byte_for_byte(tmp_path: Path) -> None:
    raw = session_2x()
    path = _write(tmp_path, raw)
    out = tmp_path / "out.jsonl"
    result = uncompact(path, output=out)
    assert result.plan.compactions == [7]
    assert result.plan.relinked == 1 and result.plan.dropped == 2
    assert result.resume_tokens is not None and result.resume_tokens <= result.budget_tokens
    assert result.budget_tokens == 120_000
    assert path.read_bytes() == raw  # the input is never touched
    assert "prompt 0" in _chain_texts(out.read_bytes())[0]
    assert api.restore(str(out)).data == raw


def test_uncompact_in_place_and_the_cli_restore(tmp_path: Path) -> None:
    raw = session_10x()
    path = _write(tmp_path, raw)
    result = invoke(["uncompact", str(path), "--in-place", "--json"])
    entry = orjson.loads(result.stdout)
    assert entry["compactions"] == [7] and entry["chain_messages"] == 10
    assert entry["left_out"] == []
    assert SUMMARY not in path.read_text()
    invoke(["restore", str(path), "--in-place"])
    assert path.read_bytes() == raw


def test_a_small_budget_keeps_the_newest_part_whole_and_says_where_the_rest_is(
    tmp_path: Path,
) -> None:
    raw = session_2x(pre=30, post=2, text="word " * 200)
    path = _write(tmp_path, raw)
    out = tmp_path / "out.jsonl"
    result = uncompact(path, output=out, budget_tokens=3000)
    assert result.left_out and "keep_last" in result.left_out[0]
    assert result.resume_tokens is not None and result.resume_tokens <= 3000
    texts = _chain_texts(out.read_bytes())
    assert texts[0].startswith("prompt ") and texts[-1].startswith("answer 31")
    kept = [int(t.split()[1].rstrip(":")) for t in texts if t.startswith("prompt")]
    assert kept == list(range(kept[0], 32))  # the newest turns, whole and in order
    assert api.restore(str(out)).data == raw
    cli = invoke(["uncompact", str(path), "-o", str(tmp_path / "o2.jsonl"), "--budget", "3000"])
    assert "left out to fit the budget" in cli.stderr


def test_codex_compacted_record_is_dropped_and_restored(tmp_path: Path) -> None:
    before, after = rollout()
    raw = _lines([*before, *after])
    path = _write(tmp_path, raw, "rollout-2025-09-24T19-22-20-01997e76.jsonl")
    out = tmp_path / "out.jsonl"
    result = uncompact(path, output=out)
    assert result.plan.agent == "codex" and result.plan.compactions == [8]
    written = out.read_bytes()
    assert b'"compacted"' not in written and b"prompt 0" in written
    assert result.budget_tokens == 160_000
    assert api.restore(str(out)).data == raw


def test_a_rewritten_codex_rollout_comes_back_from_its_snapshot(tmp_path: Path) -> None:
    before, after = rollout()
    path = _write(tmp_path, _lines(before), "rollout-2025-09-24T19-22-20-01997e76.jsonl")
    snap = take_snapshot(path)  # what the PreCompact hook does
    rewritten = _lines([CODEX_META, *after])  # Codex rewrote the file: history gone
    path.write_bytes(rewritten)
    out = tmp_path / "out.jsonl"
    result = uncompact(path, output=out)
    assert result.plan.snapshot == snap.path
    datas = _datas(out.read_bytes())
    users = [
        d["payload"]["content"][0]["text"]
        for d in datas
        if d["type"] == "response_item" and d["payload"]["role"] == "user"
    ]
    assert users == [f"prompt {n}" for n in range(5)]
    assert sum(1 for d in datas if d["type"] == "session_meta") == 1
    assert api.restore(str(out)).data == rewritten


def test_a_session_without_compaction_is_left_alone(tmp_path: Path) -> None:
    raw = _lines(_turns(0, 2, None))
    path = _write(tmp_path, raw)
    result = invoke(["uncompact", str(path), "--in-place"])
    assert "no compaction found" in result.stderr
    assert path.read_bytes() == raw


def test_cli_needs_one_destination(tmp_path: Path) -> None:
    path = _write(tmp_path, session_2x())
    result = invoke(["uncompact", str(path)], code=2)
    assert "-o OUT or --in-place" in result.stderr


def test_the_shipped_sample_and_the_real_compacted_session(tmp_path: Path) -> None:
    need_shared()
    for source in (SAMPLE, SHARED / "cc_spotter_4d5611e5.jsonl"):
        raw = source.read_bytes()
        path = tmp_path / source.name
        shutil.copyfile(source, path)
        # The sample carries a line a redaction tool broke (its chain starts at an
        # assistant turn until doctor repairs it): uncompact works on the repaired file.
        fix_in_place(path, force=True)
        raw = path.read_bytes()
        out = tmp_path / f"out-{source.name}"
        result = uncompact(path, output=out)
        assert len(result.plan.compactions) == 1, source
        written = out.read_bytes()
        assert SUMMARY.encode() not in written
        chain = resume_chain([_safe(line) for line in written.splitlines()])
        first = _safe(written.splitlines()[chain[0]])
        assert first["type"] == "user", source
        assert first["uuid"] == next(
            d["uuid"] for d in map(_safe, raw.splitlines()) if d and d.get("type") == "user"
        )
        # Every change is undone: the uncompaction's reduction, itself, then the repair.
        assert api.restore(str(out)).data == source.read_bytes()


def _safe(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def test_a_partial_compaction_is_left_as_it_is(tmp_path: Path) -> None:
    records = [orjson.loads(line) for line in session_2x().splitlines()]
    records[6]["compactMetadata"] = {"trigger": "manual", "preservedSegment": {"headUuid": "u2"}}
    raw = _lines(records)
    plan = plan_uncompact(raw, lambda unit: ["o", len(unit)])
    assert plan.compactions == [] and plan.partial == [7]
    assert plan.output == raw
    result = invoke(["uncompact", str(_write(tmp_path, raw)), "-o", str(tmp_path / "o.jsonl")])
    assert "a partial compaction" in result.stderr and "no compaction found" in result.stderr
