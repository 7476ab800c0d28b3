"""The resume point comes from the chain Claude Code walks back from the leaf (1.0.x and 2.x)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli.formats.claude_code import resume_chain
from ctxcli.formats.validate import validate_bytes
from ctxcli.sessions import diagnose
from support.cli import invoke
from support.paths import SHARED


def _rec(uuid: str, parent: str | None, role: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        message = {"id": f"msg_{uuid}", "type": "message", "model": "claude-sonnet-4", **message}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s-1",
        "version": "1.0.61",
        "type": role,
        "message": message,
        "uuid": uuid,
        **extra,
    }


def _old_session() -> list[dict[str, Any]]:
    """A 1.0.x session compacted once: no compact_boundary, the chain restarts at null."""
    long = "earlier work " * 400
    return [
        _rec("u1", None, "user", "first task " + long),
        _rec("a1", "u1", "assistant", [{"type": "text", "text": "done " + long}]),
        _rec("u2", "a1", "user", "more " + long),
        _rec("a2", "u2", "assistant", [{"type": "text", "text": "ok " + long}]),
        _rec(
            "s1",
            None,
            "user",
            "This session is being continued from a previous conversation. Summary: ...",
            isCompactSummary=True,
        ),
        _rec("a3", "s1", "assistant", [{"type": "text", "text": "continuing"}]),
        _rec("u3", "a3", "user", "next"),
        _rec("a4", "u3", "assistant", [{"type": "text", "text": "sure"}]),
    ]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_a_1_0_restart_is_not_an_extra_root(tmp_path: Path) -> None:
    raw = _write(tmp_path / "old.jsonl", _old_session()).read_bytes()
    assert validate_bytes(raw) == [] and diagnose(raw).problems == []
    assert resume_chain([orjson.loads(x) for x in raw.splitlines()]) == [4, 5, 6, 7]
    # A second null parent that is no compaction summary is still reported (by ctx doctor).
    records = _old_session()
    records[4].pop("isCompactSummary")
    bad = _write(tmp_path / "bad.jsonl", records).read_bytes()
    assert [p.kind for p in diagnose(bad).problems] == ["extra_root"]


def test_resume_tokens_count_from_the_restart(tmp_path: Path) -> None:
    path = _write(tmp_path / "old.jsonl", _old_session())
    report = orjson.loads(invoke(["stats", str(path), "--json"]).stdout)["files"][0]
    assert report["tokens_before"] > 3000
    assert 0 < report["resume_tokens_before"] < 100


def test_drop_before_compaction_cuts_at_the_1_0_restart(tmp_path: Path) -> None:
    path = _write(tmp_path / "old.jsonl", _old_session())
    out = tmp_path / "out.jsonl"
    invoke(["reduce", str(path), "-o", str(out), "--preset", "claude-code-resume", "-q"])
    kept = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert [r["uuid"] for r in kept] == ["s1", "a3", "u3", "a4"]
    assert kept[0]["parentUuid"] is None
    assert "messages before this compaction are saved to" in kept[0]["message"]["content"]
    restored = invoke(["restore", str(out)]).stdout_bytes
    assert restored == path.read_bytes()


def test_the_chain_follows_parent_links_not_file_order(tmp_path: Path) -> None:
    # A boundary that is not on the leaf's chain (a rewind branched off before it)
    # does not cut what a resume sends.
    records = [
        _rec("u1", None, "user", "task"),
        _rec("a1", "u1", "assistant", [{"type": "text", "text": "x"}]),
        {"type": "system", "subtype": "compact_boundary", "parentUuid": None, "uuid": "b1"},
        _rec("u2", "b1", "user", "after the compaction"),
        _rec("u3", "a1", "user", "rewound"),
        _rec("a3", "u3", "assistant", [{"type": "text", "text": "y"}]),
    ]
    raw = _write(tmp_path / "branch.jsonl", records).read_bytes()
    assert resume_chain([orjson.loads(x) for x in raw.splitlines()]) == [0, 1, 4, 5]
    report = orjson.loads(invoke(["stats", str(tmp_path / "branch.jsonl"), "--json"]).stdout)
    report = report["files"][0]
    assert report["resume_tokens_before"] == report["tokens_before"]


@pytest.mark.real_data
def test_real_2_1_sessions_resume_after_their_boundary() -> None:
    raw = (SHARED / "cc_spotter_4d5611e5.jsonl").read_bytes()
    datas = [orjson.loads(x) for x in raw.splitlines()]
    chain = resume_chain(datas)
    assert datas[chain[0]].get("subtype") == "compact_boundary"
    assert chain[0] == 753  # line 754, the file's only boundary
    assert datas[chain[1]].get("isCompactSummary") is True
