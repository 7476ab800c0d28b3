"""Presets: named stage chains, --preset, `preset = ...` in ctx.toml, and `ctx presets`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ctxcli.api import reduce_file, stats_file
from ctxcli.core.errors import ConfigError
from ctxcli.pipeline.config import build_config, load_config
from ctxcli.pipeline.presets import get_preset, preset_names
from support.cli import invoke
from support.paths import FIXTURES

SESSION = FIXTURES / "claude_code_resume" / "session.jsonl"
RESUME = [
    "drop_before_compaction",
    "prune_sidecars",
    "clear_thinking",
    "strip_system_reminders",
    "dedupe_outputs",
    "truncate_tool_output",
    "clear_tool_results",
    "update_usage",
]


def uses(path_or_config: object) -> list[str]:
    config = path_or_config
    return [s.use for s in config.stages]  # type: ignore[attr-defined]


def test_shipped_presets() -> None:
    assert preset_names() == [
        "claude-code-resume",
        "codex-resume",
        "eino",
        "keep-terms",
        "live",
        "mini-swe-agent",
        "reasonblocks",
        "swe-agent",
        "synaptic",
    ]
    chains = {name: uses(build_config({"preset": name}, name)) for name in preset_names()}
    assert chains == {
        "claude-code-resume": RESUME,
        "codex-resume": [
            "clear_thinking",
            "dedupe_outputs",
            "truncate_tool_output",
            "clear_tool_results",
            "update_usage",
        ],
        "eino": ["truncate_tool_output", "clear_tool_results"],
        "live": ["truncate_tool_output", "clear_tool_results"],
        "keep-terms": [
            "dedupe_outputs",
            "clear_thinking",
            "strip_system_reminders",
            "compress_words",
        ],
        "mini-swe-agent": ["clear_tool_results"],
        "reasonblocks": ["head_tail", "compress_words", "nudge_early_exit"],
        "swe-agent": ["clear_tool_results"],
        "synaptic": ["strip_and_truncate"],
    }


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_is_documented_and_a_valid_ctx_toml(name: str, tmp_path: Path) -> None:
    preset = get_preset(name)
    assert preset.summary and len(preset.doc.splitlines()) >= 3
    # Printed, it is a ctx.toml a user can start from: the same chain, no preset key.
    printed = invoke(["presets", name]).stdout
    assert printed == preset.text
    (tmp_path / "ctx.toml").write_text(printed)
    from_file = load_config(tmp_path / "ctx.toml")
    from_name = build_config({"preset": name}, "t")
    assert [(s.use, s.options) for s in from_file.stages] == [
        (s.use, s.options) for s in from_name.stages
    ]
    assert from_name.settings.preset == name
    assert "preset" not in tomllib.loads(printed)


def test_eino_preset_is_the_default_chain() -> None:
    from ctxcli.pipeline.config import default_config

    eino = build_config({"preset": "eino"}, "t")
    assert [(s.use, s.options) for s in eino.stages] == [
        (s.use, s.options) for s in default_config().stages
    ]


def test_ctx_presets_lists_names_and_summaries() -> None:
    result = invoke(["presets"])
    lines = result.stdout.splitlines()
    # One entry a preset, its summary wrapped under itself at 80 columns.
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == preset_names()
    assert all(len(line) <= 80 for line in lines)
    assert "claude --resume" in " ".join(result.stdout.split()[:20])
    assert result.stderr == ""


def test_unknown_preset_is_one_sentence_with_the_fix(tmp_path: Path) -> None:
    result = invoke(["presets", "claude-code-resum"], code=2)
    assert result.stdout == ""
    assert result.stderr == (
        "ctx: error: unknown preset 'claude-code-resum'; did you mean 'claude-code-resume'? "
        "valid presets: claude-code-resume, codex-resume, eino, keep-terms, live, "
        "mini-swe-agent, reasonblocks, swe-agent, synaptic. "
        "Run 'ctx presets' to see what each does.\n"
    )
    (tmp_path / "ctx.toml").write_text('preset = "einoo"\n')
    with pytest.raises(
        ConfigError, match=r"^.*ctx.toml: unknown preset 'einoo'; did you mean 'eino'\?"
    ):
        load_config(tmp_path / "ctx.toml")


def test_a_config_file_overrides_and_extends_its_preset(tmp_path: Path) -> None:
    (tmp_path / "ctx.toml").write_text(
        'preset = "claude-code-resume"\nlanguage = "zh"\n\n'
        '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 9000\n\n'
        '[[stages]]\nuse = "nudge_early_exit"\n'
    )
    config = load_config(tmp_path / "ctx.toml")
    assert uses(config) == [*RESUME, "nudge_early_exit"]
    truncate = config.stages[RESUME.index("truncate_tool_output")].options
    assert truncate.max_chars == 9000  # type: ignore[attr-defined]
    assert truncate.read_tool_name == "Read"  # type: ignore[attr-defined]  # from the preset
    assert config.settings.language == "zh"
    assert config.source == f"{tmp_path / 'ctx.toml'} (preset claude-code-resume)"


def test_stage_errors_name_the_preset(tmp_path: Path) -> None:
    (tmp_path / "ctx.toml").write_text(
        'preset = "eino"\n[[stages]]\nuse = "truncate_tool_output"\nmax_length = 1\n'
    )
    with pytest.raises(ConfigError, match=r"ctx.toml \(preset eino\): stages\[1\]"):
        load_config(tmp_path / "ctx.toml")


def test_the_flag_replaces_the_files_chain_but_keeps_its_settings(tmp_path: Path) -> None:
    (tmp_path / "ctx.toml").write_text(
        'tokenizer = "approx"\npreset = "synaptic"\n[[stages]]\nuse = "keep_last"\n'
    )
    config = load_config(tmp_path / "ctx.toml", preset="eino")
    assert uses(config) == ["truncate_tool_output", "clear_tool_results"]
    assert config.settings.tokenizer == "approx"
    assert config.settings.preset == "eino"
    # Without a config file the flag alone picks the chain.
    assert uses(load_config(preset="claude-code-resume", start=tmp_path / "nowhere")) == RESUME


def test_reduce_and_stats_take_preset(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = invoke(["reduce", str(SESSION), "-o", str(out), "--preset", "claude-code-resume"])
    summary = result.stderr.splitlines()[-1]
    assert summary.startswith(f"ctx: {SESSION}: a resume sends ")
    assert summary.endswith(f"file {SESSION.stat().st_size:,} → {out.stat().st_size:,} bytes")
    config = build_config({"preset": "claude-code-resume"}, "t")
    _, expected = reduce_file(SESSION, tmp_path / "api.jsonl", config=config)
    assert out.read_bytes().replace(b"out.jsonl.offload", b"api.jsonl.offload") == expected
    stats = json.loads(
        invoke(["stats", str(SESSION), "--preset", "claude-code-resume", "--json"]).stdout
    )
    assert [s["stage"] for s in stats["files"][0]["stages"]] == RESUME
    assert stats["bytes_after"] < stats["bytes_before"] / 3


def test_stats_report_what_a_resume_sends() -> None:
    config = build_config({"preset": "claude-code-resume"}, "t")
    report = stats_file(SESSION, config=config)
    data = report.to_dict()
    assert data["resume_tokens_before"] == report.resume_tokens_before
    # The messages after the boundary: summary, prompt, test run, answer.
    assert 0 < report.resume_tokens_before < report.tokens_before  # type: ignore[operator]
    table = invoke(["stats", str(SESSION), "--preset", "claude-code-resume"]).stderr
    assert (
        f"a resume sends (after the last compaction) {report.resume_tokens_before:,} → "
        f"{report.resume_tokens_after:,} tokens"
    ) in table.replace("\n", " ").replace("  ", " ")


def test_formats_without_resume_report_null(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "hi"}\n')
    data = json.loads(invoke(["stats", str(chat), "--json"]).stdout)["files"][0]
    assert data["resume_tokens_before"] is None and data["resume_tokens_after"] is None
    assert "a resume sends" not in invoke(["stats", str(chat)]).stderr
