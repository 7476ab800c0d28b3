"""A line that is not JSON: Claude Code and Codex keep it with a warning, others stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SHARED, invoke, need_shared
from ctxcli.api import reduce_file
from ctxcli.core.errors import TranscriptError
from ctxcli.formats import load

BROKEN_CC = SHARED / "cc_mclaude_c76e5be5.jsonl"  # line 859 is not JSON (redaction)


def _break_line(name: str, tmp_path: Path, line: int) -> Path:
    src = need_shared() / name
    lines = src.read_bytes().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1][:40] + b"\\[oops" + lines[line - 1][40:]
    out = tmp_path / name
    out.write_bytes(b"".join(lines))
    return out


@pytest.mark.real_data
def test_claude_code_keeps_the_bad_line_by_default(tmp_path: Path) -> None:
    result = invoke(["reduce", str(BROKEN_CC), "-o", str(tmp_path / "out.jsonl")])
    assert f"{BROKEN_CC}:859: not valid JSON" in result.stderr
    bad = BROKEN_CC.read_bytes().splitlines(keepends=True)[858]
    assert bad in (tmp_path / "out.jsonl").read_bytes().splitlines(keepends=True)


@pytest.mark.real_data
def test_claude_code_stops_when_asked(tmp_path: Path) -> None:
    args = ["reduce", str(BROKEN_CC), "-o", str(tmp_path / "out.jsonl"), "--on-invalid", "error"]
    result = invoke(args, code=2)
    assert f"{BROKEN_CC}:859:" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_codex_keeps_the_bad_line_by_default(tmp_path: Path) -> None:
    path = _break_line("codex_agentcmd_2025-09-25T08-02-05.jsonl", tmp_path, 7)
    report, out = reduce_file(path, tmp_path / "out.jsonl", offload_dir=tmp_path / "off")
    assert report.format == "codex"
    assert any(w.startswith(f"{path}:7: not valid JSON") for w in report.warnings)
    assert out.splitlines()[6] == path.read_bytes().splitlines()[6]


def test_the_other_formats_stay_strict(tmp_path: Path) -> None:
    path = _break_line("oai_taubench_airline_task2_trial1.jsonl", tmp_path, 5)
    with pytest.raises(TranscriptError) as info:
        reduce_file(path, tmp_path / "out.jsonl", offload_dir=tmp_path / "off")
    assert info.value.line == 5
    with pytest.raises(TranscriptError):
        load(path.read_bytes(), str(path), format="openai_chat")
    kept = load(path.read_bytes(), str(path), on_invalid="keep")
    assert any(w.startswith(f"{path}:5:") for w in kept.warnings)


def test_a_file_of_nothing_but_bad_lines_names_the_first(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b"{not json\n{nor this\n")
    with pytest.raises(TranscriptError) as info:
        load(path.read_bytes(), str(path))
    assert info.value.line == 1
    assert "not valid JSON" in str(info.value)
