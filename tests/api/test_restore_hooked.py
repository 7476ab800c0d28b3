"""``ctx restore`` of a session the Claude Code hook wrote: the tools' real outputs come back.

The sessions here are built from the hook's own answers (:func:`respond` on a
``PostToolUse`` payload) and laid out as Claude Code 2.1.331 writes a tool call's
record, with its rendering of each output in the message's ``tool_result`` (Bash,
Grep: the text; Read: lines numbered ``N<TAB>`` from ``startLine``; Glob: the names and
its ``(Showing N of M ...)`` line). ``tests/e2e/test_e2e_hooks.py`` checks the same
against sessions the real CLI wrote with and without the hook.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli import api
from ctxcli.api import Destination, RunOptions
from ctxcli.core.errors import RestoreError
from ctxcli.core.hints import truncated_path
from ctxcli.hooks.post_tool_use import Limits, offload_root, respond
from support.cli import invoke

SESSION = "4d5611e5-0000-4000-8000-000000000001"
LIMIT = 400


def _outputs(cwd: Path) -> list[tuple[str, dict[str, Any], Any]]:
    """(tool, tool_input, tool_response) of one call per shape the hook cuts."""
    text = "".join(f'line {i}: \u00e9\u4e2d "q" \\ tab\there\n' for i in range(80))
    code = "".join(f"def f_{i}(x):\n    return x * {i}\n" for i in range(60))
    names = [f"data/{i:03d}-a-long-enough-file-name.txt" for i in range(40)]
    return [
        (
            "Bash",
            {"command": "cat mid.txt"},
            {
                "stdout": text.rstrip("\n"),
                "stderr": "",
                "interrupted": False,
                "isImage": False,
                "noOutputExpected": False,
            },
        ),
        (
            "Read",
            {"file_path": str(cwd / "big.py")},
            {
                "type": "text",
                "file": {
                    "filePath": str(cwd / "big.py"),
                    "content": code,
                    "numLines": 121,
                    "startLine": 1,
                    "totalLines": 121,
                },
            },
        ),
        (
            "Grep",
            {"pattern": "return", "output_mode": "content"},
            {"mode": "content", "numFiles": 0, "filenames": [], "content": code, "numLines": 60},
        ),
        (
            "Glob",
            {"pattern": "data/*.txt"},
            {
                "filenames": names,
                "durationMs": 9,
                "numFiles": 40,
                "truncated": True,
                "totalMatches": 55,
                "countIsComplete": True,
            },
        ),
    ]


def _rendered(tool: str, response: dict[str, Any]) -> str:
    """What Claude Code 2.1.331 puts in the tool_result for this output."""
    if tool == "Read":
        file = response["file"]
        lines = file["content"].split("\n")
        return "\n".join(f"{n}\t{line}" for n, line in enumerate(lines, file["startLine"]))
    if tool == "Glob":
        names = response["filenames"]
        shown, total = len(names), response["totalMatches"]
        more = f"(Showing {shown} of {total} matching files; {total - shown} more are not listed."
        return "\n".join(names) + f"\n{more} Narrow the pattern or path to see the rest.)"
    if tool == "Grep":
        return str(response["content"])
    return str(response["stdout"])


def _record(call: str, tool: str, response: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """A tool call's ``user`` record, with the keys in the order Claude Code writes them."""
    return {
        "parentUuid": f"{call}-parent",
        "isSidechain": False,
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"tool_use_id": call, "type": "tool_result", "content": _rendered(tool, response)}
            ],
        },
        "uuid": f"{call}-uuid",
        "timestamp": "2026-11-28T14:44:16.590Z",
        "toolUseResult": response,
        "sourceToolAssistantUUID": f"{call}-parent",
        "userType": "external",
        "cwd": str(cwd),
        "sessionId": SESSION,
        "version": "2.1.331",
    }


def _sessions(cwd: Path, language: str = "en") -> tuple[bytes, bytes]:
    """(the session the hook wrote, the session Claude Code writes without the hook)."""
    limits = Limits(max_chars=LIMIT, language=language)
    hooked = [{"type": "user", "message": {"role": "user", "content": "Look."}}]
    direct = list(hooked)
    for i, (tool, tool_input, response) in enumerate(_outputs(cwd)):
        call = f"toolu_{i:04d}"
        payload = {
            "session_id": SESSION,
            "cwd": str(cwd),
            "tool_name": tool,
            "tool_use_id": call,
            "tool_input": tool_input,
            "tool_response": response,
        }
        reply = respond(payload, limits, offload_root(payload, limits))
        assert reply is not None, tool
        replaced = reply["hookSpecificOutput"]["updatedToolOutput"]
        hooked.append(_record(call, tool, replaced, cwd))
        direct.append(_record(call, tool, response, cwd))
        # The client's own record that the hook ran: kept as it is by restore.
        note = {"type": "attachment", "attachment": {"type": "hook_success", "stdout": reply}}
        hooked.append(note)
        direct.append(note)
    dump = lambda records: b"".join(orjson.dumps(r) + b"\n" for r in records)  # noqa: E731
    return dump(hooked), dump(direct)


def _write(tmp_path: Path, language: str = "en") -> tuple[Path, bytes]:
    cwd = tmp_path / "project"
    cwd.mkdir(exist_ok=True)
    hooked, direct = _sessions(cwd, language)
    session = tmp_path / f"{SESSION}.jsonl"
    session.write_bytes(hooked)
    return session, direct


def _cited(session: Path) -> list[Path]:
    paths = []
    for line in session.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "toolUseResult" in record:
            path = truncated_path(json.dumps(record["toolUseResult"], ensure_ascii=False))
            assert path is not None
            paths.append(Path(path))
    return paths


@pytest.mark.parametrize("language", ["en", "zh"])
def test_restore_puts_every_original_back_as_claude_code_writes_it(
    tmp_path: Path, language: str
) -> None:
    session, direct = _write(tmp_path, language)
    assert session.read_bytes() != direct
    restored = api.restore(session)
    assert restored.data == direct
    assert len(restored.steps) == 1
    assert Path(restored.steps[0].offload_dir).name == SESSION  # <data>/hooks/<session>


def test_restore_to_a_file_to_stdout_and_in_place(tmp_path: Path) -> None:
    session, direct = _write(tmp_path)
    hooked, cited = session.read_bytes(), _cited(session)
    out = tmp_path / "original.jsonl"
    invoke(["restore", str(session), "-o", str(out)])
    assert out.read_bytes() == direct and session.read_bytes() == hooked
    result = invoke(["restore", str(session)])
    assert result.stdout_bytes == direct
    api.restore(session, Destination(None, in_place=True), options=RunOptions(force=True))
    assert session.read_bytes() == direct
    assert all(p.exists() for p in cited)  # the offloaded files stay (hints elsewhere cite them)
    # Restored: nothing left to undo.
    result = invoke(["restore", str(session), "--in-place"], code=2)
    assert "nothing to restore" in result.stderr


def test_lines_a_client_appended_are_carried_and_restored_too(tmp_path: Path) -> None:
    session, direct = _write(tmp_path)
    assert api.restore(session, raw=session.read_bytes() + b'{"type":"user"}\n').data == (
        direct + b'{"type":"user"}\n'
    )


def test_a_missing_offloaded_file_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    session, _ = _write(tmp_path)
    gone = _cited(session)[1]
    gone.unlink()
    out = tmp_path / "original.jsonl"
    result = invoke(["restore", str(session), "-o", str(out)], code=2)
    assert str(gone) in result.stderr and "missing" in result.stderr
    assert "put the file back" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_changed_offloaded_file_is_refused(tmp_path: Path) -> None:
    session, _ = _write(tmp_path)
    changed = _cited(session)[0]
    os.chmod(changed, 0o600)
    changed.write_text(changed.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
    with pytest.raises(RestoreError, match="was changed since the hook wrote it"):
        api.restore(session)


def test_an_edited_preview_is_refused(tmp_path: Path) -> None:
    session, _ = _write(tmp_path)
    text = session.read_text(encoding="utf-8")
    session.write_text(text.replace("line 0:", "line O:", 2), encoding="utf-8")
    with pytest.raises(RestoreError, match="not the one the hook wrote"):
        api.restore(session)


def test_a_missing_note_is_refused(tmp_path: Path) -> None:
    session, _ = _write(tmp_path)
    cited = _cited(session)[2]
    for note in (cited.parent.parent / "cuts").glob(f"{cited.name}.json*"):
        note.unlink()
    with pytest.raises(RestoreError, match="note of this offloaded output is missing"):
        api.restore(session)


def test_a_preview_claude_code_did_not_render_as_known_is_refused(tmp_path: Path) -> None:
    session, _ = _write(tmp_path)
    lines = session.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["message"]["content"][0]["content"] = "<persisted-output>saved</persisted-output>"
    lines[1] = orjson.dumps(record) + b"\n"
    session.write_bytes(b"".join(lines))
    with pytest.raises(RestoreError, match=r":2: the tool result does not hold the preview"):
        api.restore(session)


def test_another_ctx_hint_in_a_tool_output_is_not_the_hooks(tmp_path: Path) -> None:
    """An agent's ``cat`` of a reduced file shows a hint the hook never wrote: left alone."""
    hint = "[ctx: output truncated, 9 of 10 chars omitted; full output saved to /x/trunc/a (read it with Read)]"
    record = _record("toolu_9", "Bash", {"stdout": hint, "stderr": ""}, tmp_path)
    session = tmp_path / "s.jsonl"
    session.write_bytes(orjson.dumps(record) + b"\n")
    with pytest.raises(RestoreError, match="nothing to restore"):
        api.restore(session)


def test_a_reduction_on_top_of_a_hook_written_session_is_undone_first(tmp_path: Path) -> None:
    session, direct = _write(tmp_path)
    api.reduce(session, Destination(None, in_place=True), options=RunOptions(force=True))
    restored = api.restore(session)
    assert restored.data == direct
    # The reduction first, the hook's cuts last: the last step holds the original.
    assert len(restored.steps) == 2
    assert restored.steps[-1].restored_sha256 == hashlib.sha256(direct).hexdigest()
    assert restored.steps[-1].restored_bytes == len(direct)


def test_a_hook_output_offloaded_before_notes_existed_is_refused(tmp_path: Path) -> None:
    """An older ctx's hook wrote no notes: its cuts are never left in place unsaid."""
    session, _ = _write(tmp_path)
    cited = _cited(session)[0]
    shutil.rmtree(cited.parent.parent / "cuts")
    with pytest.raises(RestoreError, match="note of this offloaded output is missing"):
        api.restore(session)
