"""The hook's note beside each output it offloads: what restore verifies and puts back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxcli.core.errors import RestoreError
from ctxcli.core.hints import truncated_path
from ctxcli.hooks.post_tool_use import Limits, respond
from ctxcli.store.hook_notes import original_for


def _cut(root: Path, stdout: str) -> tuple[str, str]:
    payload = {
        "session_id": "s",
        "cwd": str(root),
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_input": {"command": "cat x"},
        "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False},
    }
    reply = respond(payload, Limits(max_chars=300), root / "offload")
    assert reply is not None
    preview = reply["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    cited = truncated_path(preview)
    assert cited is not None
    return cited, preview


def test_the_hook_notes_where_it_cut_and_the_digests(tmp_path: Path) -> None:
    original = "".join(f"row {i}\n" for i in range(200))
    cited, preview = _cut(tmp_path, original)
    notes = list((tmp_path / "offload" / "cuts").iterdir())
    assert [p.name for p in notes] == ["toolu_1.json"]
    assert notes[0].stat().st_mode & 0o777 == 0o600
    note = json.loads(notes[0].read_text())
    assert note["tool_use_id"] == "toolu_1" and note["at"] == ["stdout"] and note["file"] == cited
    assert "original" not in note  # the file holds it exactly
    assert original_for(cited, preview, ("stdout",), False) == original


def test_an_original_the_file_cannot_hold_exactly_is_kept_in_the_note(tmp_path: Path) -> None:
    original = "a lone surrogate \ud800 here\n" * 40
    cited, preview = _cut(tmp_path, original)
    assert "\ufffd" in Path(cited).read_text(encoding="utf-8")  # what an agent can read
    assert original_for(cited, preview, ("stdout",), False) == original


def test_a_preview_found_elsewhere_than_the_hook_cut_it_is_refused(tmp_path: Path) -> None:
    cited, preview = _cut(tmp_path, "x\n" * 400)
    with pytest.raises(RestoreError, match="elsewhere than the hook cut it"):
        original_for(cited, preview, ("stderr",), False)


def test_a_hint_of_no_hook_directory_is_not_the_hooks(tmp_path: Path) -> None:
    assert original_for(str(tmp_path / "r" / "trunc" / "a"), "x", ("stdout",), False) is None
