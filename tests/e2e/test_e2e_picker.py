"""Why ``ctx doctor`` has no check for a first prompt too long for the session picker.

Claude Code 2.1.42 read the first 16 KB of each session file to list it, so a longer first
prompt hid the session from ``/resume`` and ``--resume ID`` (anthropics/claude-code#25721,
#25920). The pinned client does not: its ``claude --resume`` picker, in a terminal against
the fake Messages API, lists sessions whose first prompt is far beyond any such window,
with the prompt's first words, and ``claude -p --resume ID`` resumes them. If a new pin
brings the limit back, this fails, and the check is then worth building.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness import MARKER, claude_picker, require, resume_claude

pytestmark = pytest.mark.e2e

SIZES = (20_000, 100_000, 2_000_000)
"""First prompts past the 16 KB and 64 KB windows clients have read, and a 2 MB one."""


def _session(folder: Path, tag: str, size: int, blocks: bool) -> Path:
    """A two-record session whose first prompt is ``size`` characters starting with ``tag``.

    Its cwd is the project the harness runs the client in (``<folder>/../w/project``).
    """
    sid = str(uuid.uuid4())
    text = f"{tag} " + "".join(
        f"{tag} line {n:07d} of the pasted plan\n" for n in range(size // 30)
    )
    prompt: Any = [{"type": "text", "text": text[:size]}] if blocks else text[:size]
    base = {"isSidechain": False, "userType": "external", "sessionId": sid, "version": "2.1.331"}
    base["cwd"] = str(folder.parent / "w" / "project")
    stamp = "2026-03-02T09:14:30.000Z"
    user = {"parentUuid": None, **base, "type": "user", "uuid": str(uuid.uuid4())}
    user |= {"message": {"role": "user", "content": prompt}, "timestamp": stamp}
    answer = {
        "role": "assistant",
        "id": f"msg_{sid[:8]}",
        "type": "message",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Looks fine."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    reply = {"parentUuid": user["uuid"], **base, "type": "assistant", "uuid": str(uuid.uuid4())}
    reply |= {"message": answer, "timestamp": stamp}
    path = folder / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(user) + "\n" + json.dumps(reply) + "\n")
    return path


def test_the_picker_lists_sessions_whose_first_prompt_is_long(tmp_path: Path) -> None:
    require("claude")
    tags = {f"LONGFIRST{size}{kind}": (size, kind == "B") for size in SIZES for kind in "SB"}
    sessions = [_session(tmp_path / "s", tag, size, b) for tag, (size, b) in tags.items()]
    short = _session(tmp_path / "s", "SHORTFIRST", 40, False)
    screen = claude_picker(tmp_path / "w", [*sessions, short], [*tags, "SHORTFIRST"])
    missing = [tag for tag in [*tags, "SHORTFIRST"] if tag not in screen]
    assert missing == [], screen[-3000:]
    assert "(session)" not in screen  # each is labelled with its prompt, not the fallback


def test_a_session_whose_first_prompt_is_2_mb_resumes_by_id(tmp_path: Path) -> None:
    require("claude")
    session = _session(tmp_path / "s", "LONGFIRST", 2_000_000, False)
    turn = resume_claude(tmp_path / "w", session).accepted_turn("/v1/messages", "2 MB prompt")
    sent = json.dumps(turn.body)
    prompt = json.loads(session.read_text().splitlines()[0])["message"]["content"]
    assert len(prompt) == 2_000_000
    assert MARKER in sent and json.dumps(prompt) in sent
