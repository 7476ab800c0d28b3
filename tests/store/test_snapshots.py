"""Snapshots of a session file before its client rewrites it (store/snapshots.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ctxcli.core.errors import CtxError
from ctxcli.services.dirs import data_dir
from ctxcli.store.snapshots import snapshots_of, take_snapshot
from support.paths import REPO

SAMPLES = REPO / "sample_transcripts"


def test_a_snapshot_is_a_private_copy_taken_once_per_content(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes((SAMPLES / "codex_rollout.jsonl").read_bytes())
    first = take_snapshot(session)
    again = take_snapshot(session)  # PreCompact fired twice for one compaction
    assert again == first and first.number == 1
    assert first.path.read_bytes() == session.read_bytes()
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(first.path.parent.stat().st_mode) == 0o700
    assert data_dir() in first.path.parents
    session.write_bytes(session.read_bytes() + b'{"type":"event_msg","payload":{}}\n')
    second = take_snapshot(session)
    assert second.number == 2
    assert [s.number for s in snapshots_of(session)] == [2, 1]


def test_a_moved_session_keeps_its_snapshots(tmp_path: Path) -> None:
    session = tmp_path / "a" / "s.jsonl"
    session.parent.mkdir()
    session.write_bytes((SAMPLES / "claude_code_session.jsonl").read_bytes())
    taken = take_snapshot(session)
    moved = tmp_path / "b" / "s.jsonl"
    moved.parent.mkdir()
    session.rename(moved)
    assert snapshots_of(moved) == [taken]


def test_only_a_session_is_snapshotted(tmp_path: Path) -> None:
    other = tmp_path / "chat.jsonl"
    other.write_bytes((SAMPLES / "openai_chat_support.jsonl").read_bytes())
    with pytest.raises(CtxError, match="not a Claude Code session or a Codex rollout"):
        take_snapshot(other)
    assert not list(tmp_path.rglob("*.tmp"))
