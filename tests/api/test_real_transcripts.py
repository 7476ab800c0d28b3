"""Every real transcript in ../shared/transcripts: detected, reduced, restored, stable.

The files are third-party transcripts read in place (never copied into the repo);
the whole module is skipped when the directory is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.api import RunOptions, reduce_file, restore_file
from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Kind
from ctxcli.formats import load
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import Config, build_config, default_config
from support.paths import SHARED, corpus, shared_transcripts

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_data,
]

FILES = shared_transcripts()
BROKEN = "cc_mclaude_c76e5be5.jsonl"  # line 859: an invalid JSON escape left by redaction
TIGHT = build_config(
    {
        "stages": [
            {"use": "truncate_tool_output", "max_chars": 2000},
            {"use": "clear_tool_results", "max_tokens": 20000},
        ]
    },
    "real transcripts",
)
CONFIGS = {"default": default_config(), "tight": TIGHT}


def expected_format(name: str) -> str:
    if name.startswith("cc_"):
        return "claude_code"
    if name.startswith("codex_"):
        return "codex"
    if name.startswith("anthropic_"):
        return "anthropic"
    if name.startswith("oai_"):
        return "openai_chat"
    if name.endswith((".traj", ".traj.json")):
        return "json_doc"
    raise AssertionError(f"no expected format for {name}; add it here")


def on_invalid(path: Path) -> str:
    return "keep" if path.name == BROKEN else "error"


def problems(raw: bytes, path: Path) -> set[tuple[str, str | None]]:
    return {
        (p.kind, p.call_id) for p in validate_bytes(raw, str(path), on_invalid=on_invalid(path))
    }


@pytest.mark.parametrize("path", corpus(FILES))
def test_detected_format(path: Path) -> None:
    doc = load(path.read_bytes(), str(path), on_invalid=on_invalid(path))
    assert doc.format.name == expected_format(path.name)
    assert len(doc.conversation) > 0


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("path", corpus(FILES))
def test_reduce_restore_rerun_validate(path: Path, name: str, tmp_path: Path) -> None:
    cfg: Config = CONFIGS[name]
    raw = path.read_bytes()
    mode = on_invalid(path)
    out_path = tmp_path / "reduced"
    report, out = reduce_file(
        path,
        out_path,
        config=cfg,
        offload_dir=tmp_path / "off",
        options=RunOptions(on_invalid=mode),
    )
    assert report.format == expected_format(path.name)
    assert restore_file(out_path, offload_dir=tmp_path / "off") == raw
    _, again = reduce_file(
        out_path,
        tmp_path / "again",
        config=cfg,
        offload_dir=tmp_path / "off2",
        options=RunOptions(on_invalid=mode),
    )
    assert again == out, "a second reduce must change nothing"
    assert problems(out, path) <= problems(raw, path)

    doc = load(raw, str(path), on_invalid=mode)
    longest = max(
        (len(b.text) for _, b in doc.conversation.iter_blocks(Kind.TOOL_RESULT)), default=0
    )
    limit = cfg.stages[0].options.max_chars  # type: ignore[attr-defined]
    budget = cfg.stages[1].options.max_tokens  # type: ignore[attr-defined]
    if longest > limit or report.tokens_before > budget:
        assert report.tokens_after < report.tokens_before
        assert report.bytes_after < report.bytes_before == len(raw)
    else:
        assert not report.changed and out == raw


def test_invalid_line_is_an_error_naming_it_when_asked() -> None:
    path = SHARED / BROKEN
    with pytest.raises(TranscriptError) as info:
        reduce_file(
            path, None, config=TIGHT, offload_dir="unused", options=RunOptions(on_invalid="error")
        )
    assert info.value.line == 859
    assert f"{path}:859:" in str(info.value)
    assert not Path("unused").exists()


def test_invalid_line_kept_with_a_warning(tmp_path: Path) -> None:
    path = SHARED / BROKEN
    raw = path.read_bytes()
    # Claude Code reads past a bad line, so by default ctx does too (on_invalid "auto").
    report, out = reduce_file(path, tmp_path / "out", config=TIGHT, offload_dir=tmp_path / "off")
    assert any(f"{path}:859:" in w for w in report.warnings)
    bad = raw.splitlines(keepends=True)[858]
    assert bad in out.splitlines(keepends=True)  # passed through untouched
    assert report.tokens_after < report.tokens_before // 2
