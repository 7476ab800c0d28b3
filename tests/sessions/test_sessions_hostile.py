"""``ctx sessions`` against what a session file or the listing cache may hold (issue 41).

- item 11: titles, branches and summaries are text from a file (a summary is written by
  a model); an escape sequence there must be shown, never sent to the terminal.
- item 14: one wrong-typed field in the listing cache made every ``ctx sessions`` exit
  123 until the cache was deleted; a bad entry is dropped and the file read again.
- small things: a subagent shown as ``agent-a2898e3`` is found by ``--session a2898e3``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli.sessions.listing import CACHE_NAME
from support.cli import invoke

SID = "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c"
TITLE = "\x1b]0;PWNED\x07fix \x1b]8;;https://evil.example\x1b\\the link\x1b]8;;\x1b\\"
BRANCH = "main\x1b[2J\x1b[H"
SUMMARY = "Done\x1b[31m red \x9b2J"


def _record(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> bytes:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=f"msg_{uuid}", model="claude-sonnet-4-5", type="message",
                       usage={"input_tokens": 10, "output_tokens": 5})  # fmt: skip
    record = {
        "parentUuid": parent,
        "isSidechain": extra.pop("isSidechain", False),
        "type": kind,
        "message": message,
        "uuid": uuid,
        "sessionId": SID,
        "cwd": "/work/proj",
        "gitBranch": BRANCH,
        "timestamp": "2026-03-01T10:00:00Z",
        **extra,
    }
    return orjson.dumps(record) + b"\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Claude Code project with one session (hostile title, branch, summary) and a subagent."""
    claude = tmp_path / "claude"
    project = claude / "projects" / "-work-proj"
    project.mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    session = project / f"{SID}.jsonl"
    session.write_bytes(
        _record("u1", None, "user", TITLE)
        + _record("a1", "u1", "assistant", [{"type": "text", "text": "ok"}])
        + orjson.dumps({"type": "summary", "summary": SUMMARY, "leafUuid": "a1"})
        + b"\n"
    )
    sub = project / SID / "subagents" / "agent-a2898e3.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_bytes(
        _record("s1", None, "user", "look around", isSidechain=True, agentId="a2898e3")
        + _record("s2", "s1", "assistant", [{"type": "text", "text": "seen"}], isSidechain=True)
    )
    return tmp_path


def test_printable_shows_control_characters_as_escapes() -> None:
    from ctxcli.cli.sessions import printable

    assert printable("a\x1b[2Jb\x07c\x9bd\u202ee\tf") == "a\\x1b[2Jb\\x07c\\x9bd\\u202ee\\tf"
    assert printable("naïve 漢字 😀") == "naïve 漢字 😀"


def test_sessions_prints_no_escape_sequence_from_a_session_file(home: Path) -> None:
    out = invoke(["sessions", "--no-cache"]).stdout
    assert not any(ch in out for ch in "\x1b\x07\x9b"), out
    assert "\\x1b[2J" in out  # the branch, shown
    assert "\\x1b[31m" in out  # the model-written summary is the title
    rows = orjson.loads(invoke(["sessions", "--json", "--no-cache"]).stdout)["sessions"]
    assert rows[0]["summary"] == SUMMARY  # JSON carries the text as it is (escaped by JSON)


def test_validate_and_doctor_print_no_escape_sequence(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    bad = "call\x1b]0;PWNED\x07"
    path.write_bytes(
        orjson.dumps({"role": "user", "content": "hi"})
        + b"\n"
        + orjson.dumps({"role": "tool", "tool_call_id": bad, "content": "x"})
        + b"\n"
    )
    for command in ("validate", "doctor"):
        err = invoke([command, str(path)], code=1).stderr
        assert "\x1b" not in err and "\x07" not in err and "call\\x1b]0;PWNED" in err


def test_a_bad_cache_entry_is_read_again_not_a_crash(home: Path) -> None:
    first = orjson.loads(invoke(["sessions", "--json"]).stdout)["sessions"]
    cache = home / ".ctx-cache" / CACHE_NAME
    assert cache.is_file()
    for field, value in (("usage", [1]), ("model", 5), ("usage", {"m": [1]}), ("records", "x")):
        data = orjson.loads(cache.read_bytes())
        for entry in data["entries"].values():
            entry[field] = value
        cache.write_bytes(orjson.dumps(data))
        again = orjson.loads(invoke(["sessions", "--json"]).stdout)["sessions"]
        assert again == first, field
        # The bad entries were replaced by good ones.
        fixed = orjson.loads(cache.read_bytes())["entries"]
        assert all(entry[field] != value for entry in fixed.values()), field
    # Entries that are not even a mapping: the same.
    data = orjson.loads(cache.read_bytes())
    data["entries"] = [1, 2]
    cache.write_bytes(orjson.dumps(data))
    assert orjson.loads(invoke(["sessions", "--json"]).stdout)["sessions"] == first


def test_a_subagent_is_found_by_its_id_without_agent(home: Path) -> None:
    rows = orjson.loads(invoke(["sessions", "--json", "--no-cache"]).stdout)["sessions"]
    assert [r["id"] for r in rows] == [SID, f"{SID}/agent-a2898e3"]
    table = invoke(["sessions", "--no-cache"]).stdout
    assert "└ agent-a2898e3" in table
    for ref in ("a2898e3", "agent-a2898e3", "a289"):
        entry = orjson.loads(invoke(["doctor", "--session", ref, "--json"]).stdout)
        assert entry["input"].endswith("subagents/agent-a2898e3.jsonl"), ref
