"""A line that is not JSON: Claude Code and Codex keep it with a warning, others stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.api import reduce_file
from ctxcli.api.batch import stats_many
from ctxcli.core.errors import ConfigError, OnInvalid, TranscriptError
from ctxcli.formats import load
from ctxcli.formats.lines import parse_lines
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import load_config
from ctxcli.pipeline.options import RunOptions
from support.cli import invoke
from support.paths import SHARED, need_shared

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


def test_an_unknown_on_invalid_is_refused_by_the_library() -> None:
    # Before, only the CLI checked: a library caller's "skip" silently meant "error".
    need_shared()
    raw = BROKEN_CC.read_bytes()
    message = "on_invalid 'skip' is invalid: use 'auto', 'error' or 'keep'."
    for call in (
        lambda: load(raw, str(BROKEN_CC), on_invalid="skip"),
        lambda: load(raw, str(BROKEN_CC), format="claude_code", on_invalid="skip"),
        lambda: parse_lines(raw, str(BROKEN_CC), on_invalid="skip"),
        lambda: validate_bytes(raw, str(BROKEN_CC), on_invalid="skip"),
        lambda: reduce_bytes(raw, options=RunOptions(on_invalid="skip")),  # type: ignore[arg-type]
        lambda: stats_many([BROKEN_CC], load_config(), options=RunOptions(on_invalid="skip")),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigError) as info:
            call()
        assert str(info.value) == message


def test_on_invalid_takes_the_enum_or_its_value() -> None:
    need_shared()
    raw = BROKEN_CC.read_bytes()
    by_value = load(raw, str(BROKEN_CC), on_invalid="keep")
    by_enum = load(raw, str(BROKEN_CC), on_invalid=OnInvalid.KEEP)
    assert by_enum.warnings == by_value.warnings != []
    with pytest.raises(TranscriptError):
        load(raw, str(BROKEN_CC), on_invalid=OnInvalid.ERROR)


# -- issue 35 §3: a file where no line parses is not a transcript ---------------------------


def test_a_binary_file_is_not_a_transcript(tmp_path: Path) -> None:
    import gzip

    from support.paths import REPO

    packed = tmp_path / "session.jsonl.gz"  # what a user may pass: a compressed session
    packed.write_bytes(
        gzip.compress((REPO / "sample_transcripts/openai_chat_support.jsonl").read_bytes())
    )
    for args in (["stats", str(packed)], ["reduce", str(packed), "-o", "out.jsonl"]):
        for mode in ("auto", "keep"):
            err = invoke([*args, "--on-invalid", mode], code=2).stderr
            assert err.startswith(f"ctx: error: {packed}:1: not a transcript: none of its ")
            assert "lines is JSON" in err and "--on-invalid" not in err
            assert err.count("\n") == 1
