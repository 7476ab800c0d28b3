"""The real Claude Code CLI resumes every real Claude Code session, original and reduced.

For each session in ../shared/transcripts the original and its ``claude-code-resume``
reduction are put into a fresh HOME; ``claude -p ... --resume ID`` runs against the fake
Messages API (which rejects what the real API rejects). The client must exit 0, the
server must accept the resumed turn, and the conversation the client sent for the
reduced session must be smaller than the original's by the share ``ctx stats``
predicted, within 10 points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import (
    claude_slug,
    measure,
    predicted_share,
    reduce,
    reduced_copy,
    require,
    require_shared,
    resume_claude,
    session_id_of,
    shared,
)

from support.paths import corpus

pytestmark = pytest.mark.e2e

MESSAGES = "/v1/messages"
# One malformed line (859): the client skips it, the chain then starts at an
# assistant turn and the API answers 400 "first message must use the user role".
BROKEN = {"cc_mclaude_c76e5be5.jsonl"}
# A subagent (sidechain) file is not resumable on its own: the client resumes its
# parent and never sends the subagent's records (tested separately below).
SUBAGENT = "_subagent_"
SESSIONS = [p for p in shared("cc_") if SUBAGENT not in p.name]


@pytest.fixture(autouse=True)
def _needs_client() -> None:
    require_shared()
    require("claude")


@pytest.mark.parametrize("session", corpus([p for p in SESSIONS if p.name not in BROKEN]))
def test_original_and_reduced_resume(session: Path, tmp_path: Path) -> None:
    reduced, stats = reduced_copy(session, "claude-code-resume", tmp_path)
    before = resume_claude(tmp_path / "orig", session).accepted_turn(MESSAGES, "original")
    after = resume_claude(tmp_path / "red", reduced).accepted_turn(MESSAGES, "reduced")
    b, a = measure(before), measure(after)
    measured = 1 - a.conversation_tokens / b.conversation_tokens
    predicted = predicted_share(stats)
    print(
        f"{session.name}: request {b.body_bytes:,} -> {a.body_bytes:,} bytes, "
        f"conversation {b.conversation_tokens:,} -> {a.conversation_tokens:,} tokens "
        f"({measured:.1%} saved; ctx stats predicted {predicted:.1%})"
    )
    assert a.body_bytes < b.body_bytes
    assert abs(measured - predicted) <= 0.10, (measured, predicted)


@pytest.mark.parametrize("session", corpus([p for p in SESSIONS if p.name in BROKEN]))
def test_malformed_line_breaks_the_original(session: Path, tmp_path: Path) -> None:
    # Known damage: what the client makes of it is what the real API rejects.
    run = resume_claude(tmp_path / "orig", session)
    rejected = [r for r in run.turns(MESSAGES) if not r.accepted]
    assert run.returncode != 0, run.describe()
    assert rejected and "first message must use" in str(rejected[0].error), run.describe()


@pytest.mark.parametrize("session", corpus([p for p in SESSIONS if p.name in BROKEN]))
def test_malformed_session_resumes_after_doctor_fix(session: Path, tmp_path: Path) -> None:
    """ctx doctor --fix makes it resumable, reduced too; ctx restore gives the damage back."""
    fixed = tmp_path / "fixed" / session.name
    fixed.parent.mkdir()
    fixed.write_bytes(session.read_bytes())
    ctx = [sys.executable, "-m", "ctxcli"]
    env = {**os.environ, "CTX_DATA_DIR": str(tmp_path / "data"), "CTX_NO_PLUGINS": "1"}

    def run(*args: str) -> None:
        subprocess.run([*ctx, *args], check=True, capture_output=True, env=env)

    # --force: the copy was just written, so it looks in use to doctor.
    run("doctor", str(fixed), "--fix", "--force")
    before = resume_claude(tmp_path / "orig", fixed).accepted_turn(MESSAGES, "repaired")
    reduced, stats = reduced_copy(fixed, "claude-code-resume", tmp_path)
    after = resume_claude(tmp_path / "red", reduced).accepted_turn(MESSAGES, "repaired, reduced")
    b, a = measure(before), measure(after)
    measured = 1 - a.conversation_tokens / b.conversation_tokens
    print(
        f"{session.name} after doctor --fix: request {b.body_bytes:,} -> {a.body_bytes:,} "
        f"bytes, conversation {b.conversation_tokens:,} -> {a.conversation_tokens:,} tokens "
        f"({measured:.1%} saved; ctx stats predicted {predicted_share(stats):.1%})"
    )
    assert abs(measured - predicted_share(stats)) <= 0.10
    run("restore", str(fixed), "--in-place")
    assert fixed.read_bytes() == session.read_bytes()


def test_subagent_file_beside_its_parent(tmp_path: Path) -> None:
    """A reduced subagent file in its place under the parent still lets the parent resume."""
    subs = [p for p in shared("cc_") if SUBAGENT in p.name]
    if not subs:
        pytest.skip("no subagent file in ../shared/transcripts")
    for sub in subs:
        parent = sub.with_name(sub.name.split(SUBAGENT)[0] + ".jsonl")
        reduced = tmp_path / "reduced" / sub.name
        reduced.parent.mkdir(exist_ok=True)
        reduce(sub, "claude-code-resume", reduced)
        assert reduced.stat().st_size < sub.stat().st_size
        sid = session_id_of(parent)
        work = tmp_path / sub.stem
        home = work / "home"
        agent = "agent-" + sub.stem.split(SUBAGENT)[1]
        where = home / ".claude" / "projects" / claude_slug(work / "project") / sid / "subagents"
        where.mkdir(parents=True)
        (where / f"{agent}.jsonl").write_bytes(reduced.read_bytes())
        resume_claude(work, parent, sid).accepted_turn(MESSAGES, f"parent of {sub.name}")


COMPACT_PROMPT = "Your task is to create a detailed summary of the conversation so far"


def _compactions(run) -> int:
    return sum(1 for r in run.requests if COMPACT_PROMPT in json.dumps(r.body))


def _stale(session: Path, out: Path) -> Path:
    """``session`` whose last response is two records (as the client writes a text turn
    after thinking) stating 185k context tokens: over the client's auto-compact threshold."""
    lines = session.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if b'"type":"assistant"' in line)
    record = json.loads(lines[last])
    head = json.loads(lines[last])
    head["uuid"] = record["uuid"][:-4] + "beef"
    head["message"]["content"] = [{"type": "text", "text": "Looking at it."}]
    record["parentUuid"] = head["uuid"]
    usage = record["message"]["usage"]
    usage["cache_read_input_tokens"] = 185_000 - usage.get("cache_creation_input_tokens", 0)
    head["message"]["usage"] = dict(usage)
    dumps = [json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in (head, record)]
    out.write_bytes(b"".join([*lines[:last], *dumps, *lines[last + 1 :]]))
    return out


def test_a_stale_usage_no_longer_compacts_after_claude_code_resume(tmp_path: Path) -> None:
    """The client compacts first when the last usage is over its threshold; reduced, not."""
    session = next(p for p in SESSIONS if p.name not in BROKEN)
    stale = _stale(session, tmp_path / session.name)
    orig = resume_claude(tmp_path / "orig", stale)
    assert _compactions(orig) >= 1, orig.describe()
    reduced, _ = reduced_copy(stale, "claude-code-resume", tmp_path)
    red = resume_claude(tmp_path / "red", reduced)
    red.accepted_turn(MESSAGES, "reduced")
    assert _compactions(red) == 0, red.describe()
