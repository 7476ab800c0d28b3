"""The real CLIs resume what ``ctx uncompact`` writes: the conversation before the compaction.

Every compacted Claude Code session in ../shared/transcripts and the repository's
compacted sample are uncompacted (``ctx uncompact FILE -o OUT``) and resumed with
``claude -p ... --resume ID`` against the fake Messages API. The resumed request must be
accepted and carry every human prompt from before the compaction and not the summary,
where the compacted original carries the summary and none of them. A Codex rollout with
a ``compacted`` record (a real rollout with one added: none in the corpus has one) goes
the same way through ``codex exec resume``. Resume time and request size are printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness import measure, require, require_shared, resume_claude, resume_codex, shared

from support.paths import corpus

pytestmark = pytest.mark.e2e

MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
SUMMARY = "This session is being continued from a previous conversation"
SAMPLE = Path(__file__).resolve().parents[2] / "sample_transcripts" / "claude_code_session.jsonl"
COMPACTED = [p for p in shared("cc_") if b'"compact_boundary"' in p.read_bytes()]


def _ctx(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxcli", *args], check=True, capture_output=True, text=True, env=env
    )


def _records(path: Path) -> list[Any]:
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            out.append(None)
    return out


def _prompts_before_compaction(path: Path) -> list[str]:
    """What the user typed before the (first) compaction: string prompts, not commands."""
    prompts = []
    for data in _records(path):
        if not isinstance(data, dict):
            continue
        if data.get("subtype") == "compact_boundary" or data.get("isCompactSummary"):
            break
        message = data.get("message")
        if data.get("type") != "user" or data.get("isMeta") or not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str) and content.strip() and not content.startswith("<"):
            prompts.append(content)
    return prompts


def _uncompacted(session: Path, tmp_path: Path) -> tuple[Path, dict[str, Any], float]:
    env = {**os.environ, "CTX_DATA_DIR": str(tmp_path / "data"), "CTX_NO_PLUGINS": "1"}
    work = tmp_path / "in" / session.name
    work.parent.mkdir(parents=True)
    work.write_bytes(session.read_bytes())
    if session == SAMPLE:
        # The sample carries a line a redaction tool broke; doctor repairs it first.
        _ctx(env, "doctor", str(work), "--fix", "--force")
    out = tmp_path / "out" / session.name
    out.parent.mkdir()
    start = time.perf_counter()
    result = _ctx(env, "uncompact", str(work), "-o", str(out), "--json")
    return out, json.loads(result.stdout), time.perf_counter() - start


@pytest.mark.parametrize("session", corpus([*COMPACTED, SAMPLE], "a compacted Claude Code session"))
def test_claude_code_resumes_the_conversation_before_the_compaction(
    session: Path, tmp_path: Path
) -> None:
    require_shared()
    require("claude")
    prompts = _prompts_before_compaction(session)
    assert prompts, "the session has no prompt before its compaction"
    out, entry, took = _uncompacted(session, tmp_path)
    assert entry["compactions"] and not entry["left_out"], entry

    t0 = time.perf_counter()
    before = resume_claude(
        tmp_path / "orig", session if session != SAMPLE else out.parent.parent / "in" / session.name
    )
    t_before = time.perf_counter() - t0
    t0 = time.perf_counter()
    after_run = resume_claude(tmp_path / "uncompacted", out)
    t_after = time.perf_counter() - t0
    after = after_run.accepted_turn(MESSAGES, "uncompacted")
    body = json.dumps(after.body, ensure_ascii=False)
    assert SUMMARY not in body
    missing = [p[:80] for p in prompts if json.dumps(p[:200], ensure_ascii=False)[1:-1] not in body]
    assert not missing, missing
    orig = before.accepted_turn(MESSAGES, "compacted original")
    assert SUMMARY in json.dumps(orig.body, ensure_ascii=False)
    b, a = measure(orig), measure(after)
    print(
        f"{session.name}: uncompact {took:.1f}s; resume {t_before:.1f}s -> {t_after:.1f}s; "
        f"request {b.body_bytes:,} -> {a.body_bytes:,} bytes, conversation "
        f"{b.conversation_tokens:,} -> {a.conversation_tokens:,} tokens "
        f"(budget {entry['budget_tokens']:,}, ctx counted {entry['resume_tokens']:,}); "
        f"{len(prompts)} prompts from before the compaction, all sent"
    )
    assert a.conversation_tokens <= entry["budget_tokens"] * 1.15


def _compacted_rollout(tmp_path: Path) -> tuple[Path, list[str]]:
    """A real rollout with a ``compacted`` record after its first user turn's response."""
    source = next(p for p in shared("codex_") if "agentcmd" in p.name)
    lines = source.read_bytes().splitlines(keepends=True)
    users: list[str] = []
    at = None
    for i, line in enumerate(lines):
        data = json.loads(line)
        payload = data.get("payload") or {}
        if data.get("type") == "response_item" and payload.get("role") == "user":
            text = "".join(p.get("text", "") for p in payload.get("content") or [])
            if at is None and users:
                at = i  # just before the second user message
            if not text.startswith("<"):
                users.append(text)
    assert at is not None
    stamp = json.loads(lines[at])["timestamp"]
    compacted = {"timestamp": stamp, "type": "compacted", "payload": {"message": SUMMARY + "."}}
    out = tmp_path / "rollout" / source.name
    out.parent.mkdir()
    out.write_bytes(b"".join([*lines[:at], json.dumps(compacted).encode() + b"\n", *lines[at:]]))
    return out, users


def test_codex_resumes_the_items_before_the_compaction(tmp_path: Path) -> None:
    require_shared()
    require("codex")
    rollout, users = _compacted_rollout(tmp_path)
    out, entry, took = _uncompacted(rollout, tmp_path)
    assert entry["compactions"] and entry["agent"] == "codex"
    t0 = time.perf_counter()
    orig = resume_codex(tmp_path / "orig", rollout).accepted_turn(RESPONSES, "compacted")
    t_before = time.perf_counter() - t0
    t0 = time.perf_counter()
    after = resume_codex(tmp_path / "uncompacted", out).accepted_turn(RESPONSES, "uncompacted")
    t_after = time.perf_counter() - t0
    body = json.dumps(after.body, ensure_ascii=False)
    assert SUMMARY not in body
    assert SUMMARY in json.dumps(orig.body, ensure_ascii=False)
    assert all(json.dumps(u[:200], ensure_ascii=False)[1:-1] in body for u in users)
    b, a = measure(orig), measure(after)
    print(
        f"{rollout.name} (+compacted): uncompact {took:.1f}s; resume {t_before:.1f}s -> "
        f"{t_after:.1f}s; request {b.body_bytes:,} -> {a.body_bytes:,} bytes, conversation "
        f"{b.conversation_tokens:,} -> {a.conversation_tokens:,} tokens"
    )


# -- ctx doctor --fix: sessions the users could not resume --------------------------


def _fixed_sample(tmp_path: Path, env: dict[str, str]) -> Path:
    path = tmp_path / "doctor" / SAMPLE.name
    path.parent.mkdir(parents=True)
    path.write_bytes(SAMPLE.read_bytes())
    _ctx(env, "doctor", str(path), "--fix", "--force")  # its redaction-broken line first
    return path


def _append_turns(path: Path, turns: list[tuple[Any, str]]) -> None:
    """Append user turns (content, answer) chained after the session's last record."""
    records = [r for r in _records(path) if isinstance(r, dict)]
    last = next(r for r in reversed(records) if r.get("type") in ("user", "assistant"))
    parent = last["uuid"]
    envelope = {k: last[k] for k in ("sessionId", "cwd", "version", "userType") if k in last}
    lines = []
    for n, (content, answer) in enumerate(turns):
        user = {
            "parentUuid": parent,
            "isSidechain": False,
            **envelope,
            "type": "user",
            "message": {"role": "user", "content": content},
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": "2026-03-03T15:00:00.000Z",
        }
        reply = {
            "parentUuid": user["uuid"],
            "isSidechain": False,
            **envelope,
            "type": "assistant",
            "message": {
                "id": f"msg_e2e{n:04d}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": answer}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            "uuid": f"00000000-0000-4000-9000-{n:012d}",
            "timestamp": "2026-03-03T15:00:01.000Z",
        }
        lines += [json.dumps(user), json.dumps(reply)]
        parent = reply["uuid"]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def test_a_pdf_stored_eight_times_resumes_once_after_doctor_fix(tmp_path: Path) -> None:
    require("claude")
    env = {**os.environ, "CTX_DATA_DIR": str(tmp_path / "data"), "CTX_NO_PLUGINS": "1"}
    path = _fixed_sample(tmp_path, env)
    import base64

    pdf = base64.b64encode(b"%PDF-1.4\n" + bytes(range(256)) * 800 + b"\n%%EOF\n").decode()
    block = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
    }
    repaired = len(path.read_bytes())
    _append_turns(
        path, [([block, {"type": "text", "text": f"page {n}?"}], f"page {n}.") for n in range(8)]
    )
    raw = path.read_bytes()
    t0 = time.perf_counter()
    before = resume_claude(tmp_path / "orig", path).accepted_turn(MESSAGES, "eight copies")
    t_before = time.perf_counter() - t0
    _ctx(env, "doctor", str(path), "--fix", "--force")
    fixed = path.read_bytes()
    t0 = time.perf_counter()
    after = resume_claude(tmp_path / "fixed", path).accepted_turn(MESSAGES, "after doctor --fix")
    t_after = time.perf_counter() - t0
    assert json.dumps(before.body).count(pdf[:64]) == 8
    assert json.dumps(after.body).count(pdf[:64]) == 1
    print(
        f"PDF x8: file {len(raw):,} -> {len(fixed):,} bytes ({len(raw) / len(fixed):.1f}x); "
        f"resume {t_before:.1f}s -> {t_after:.1f}s, request {before.size:,} -> {after.size:,} bytes"
    )
    assert len(raw) >= 4 * len(fixed)
    # One restore undoes both repairs; the appended turns are carried over.
    _ctx(env, "restore", str(path), "--in-place")
    assert path.read_bytes() == SAMPLE.read_bytes() + raw[repaired:]


def test_a_12_mb_tool_result_line_resumes_after_doctor_fix(tmp_path: Path) -> None:
    require("claude")
    env = {**os.environ, "CTX_DATA_DIR": str(tmp_path / "data"), "CTX_NO_PLUGINS": "1"}
    path = tmp_path / "doctor" / SAMPLE.name
    path.parent.mkdir(parents=True)
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    # The last tool result that parses (the sample's broken line is repaired alongside).
    at = max(i for i, line in enumerate(lines) if b'"tool_result"' in line and _parses(line))
    record = json.loads(lines[at])
    huge = "".join(f"{n:08d} log line of a runaway build\n" for n in range(12 * 1024 * 1024 // 36))
    for block in record["message"]["content"]:
        if block.get("type") == "tool_result":
            block["content"] = huge
    lines[at] = json.dumps(record).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    raw = path.read_bytes()
    assert max(len(line) for line in raw.splitlines()) > 12_000_000
    # First the sample's own damage only (no line limit), to time the client on the line.
    _ctx(env, "doctor", str(path), "--fix", "--force", "--max-line-bytes", str(1 << 30))
    t0 = time.perf_counter()
    before = resume_claude(tmp_path / "orig", path)
    t_before = time.perf_counter() - t0
    sent = max((r.size for r in before.turns(MESSAGES)), default=0)
    _ctx(env, "doctor", str(path), "--fix", "--force")
    t0 = time.perf_counter()
    after = resume_claude(tmp_path / "fixed", path).accepted_turn(MESSAGES, "after doctor --fix")
    took = time.perf_counter() - t0
    assert max(len(line) for line in path.read_bytes().splitlines()) < 1_000_000
    print(
        f"12 MB line: file {len(raw):,} -> {path.stat().st_size:,} bytes; resume "
        f"{t_before:.1f}s (exit {before.returncode}, request {sent:,} bytes) -> {took:.1f}s "
        f"(request {after.size:,} bytes)"
    )
    _ctx(env, "restore", str(path), "--in-place")
    assert path.read_bytes() == raw


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True
