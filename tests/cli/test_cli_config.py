"""`ctx config check`: validate a config and print the resolved pipeline as TOML."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ctxcli.pipeline.config import INIT_TEMPLATE, Config, build_config, load_config
from ctxcli.pipeline.schema import config_to_toml
from support.cli import invoke
from support.paths import REPO

CASE_CONFIGS = sorted((REPO / "tests" / "cases").glob("**/config.toml"))


def _same_pipeline(a: Config, b: Config) -> None:
    assert a.settings == b.settings
    assert a.stages == b.stages


@pytest.mark.parametrize(
    "path", CASE_CONFIGS, ids=[str(p.parent.relative_to(REPO / "tests")) for p in CASE_CONFIGS]
)
def test_printed_config_loads_back_to_the_same_pipeline(path: Path) -> None:
    result = invoke(["config", "check", str(path)])
    assert result.stderr == f"ctx: {path}: valid, {len(load_config(path).stages)} stages\n"
    _same_pipeline(build_config(tomllib.loads(result.stdout), "printed"), load_config(path))


def test_init_template_round_trips_with_overrides() -> None:
    text = INIT_TEMPLATE.replace("# [stages.tools.grep]", "[stages.tools.grep]").replace(
        "# max_chars = 20000", "max_chars = 20000"
    )
    Path("ctx.toml").write_text(text, encoding="utf-8")
    result = invoke(["config", "check"])
    assert "tools = { grep = { max_chars = 20000, skip = false } }" in result.stdout
    _same_pipeline(build_config(tomllib.loads(result.stdout), "printed"), load_config("ctx.toml"))


def test_awkward_strings_survive_the_toml_round_trip() -> None:
    tricky = 'say "hi"\\ \n\ttab \x7f del \u00e9 \U0001f600 \x01'
    config = build_config(
        {
            "offload_dir": tricky,
            "stages": [{"use": "truncate_tool_output", "read_tool_name": tricky}],
        },
        "test",
    )
    again = build_config(tomllib.loads(config_to_toml(config)), "printed")
    _same_pipeline(again, config)


def test_defaults_when_no_config_is_found() -> None:
    result = invoke(["config", "check"])
    assert result.stderr == (
        "ctx: no ctx.toml or [tool.ctx] found; the built-in defaults: valid, 2 stages\n"
    )
    assert result.stdout.startswith("# Resolved configuration from defaults")
    assert "# offload_dir is not set." in result.stdout
    data = tomllib.loads(result.stdout)
    assert [s["use"] for s in data["stages"]] == ["truncate_tool_output", "clear_tool_results"]


def test_pyproject_tool_ctx_is_found_and_named() -> None:
    Path("pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.ctx]\ntokenizer = "approx"\n\n'
        '[[tool.ctx.stages]]\nuse = "clear_tool_results"\nmax_tokens = 100\n',
        encoding="utf-8",
    )
    result = invoke(["config", "check", "--json"])
    payload = json.loads(result.stdout)
    assert payload["source"].endswith("pyproject.toml [tool.ctx]")
    assert payload["tokenizer"] == "approx"
    assert payload["stages"][0]["use"] == "clear_tool_results"
    assert payload["stages"][0]["max_tokens"] == 100
    assert list(payload) == [
        "source",
        "tokenizer",
        "language",
        "offload_dir",
        "format",
        "preset",
        "incremental",
        "made_for",
        "stages",
    ]


def test_invalid_config_is_exit_2_with_one_line() -> None:
    Path("bad.toml").write_text(
        '[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 10\n', encoding="utf-8"
    )
    result = invoke(["config", "check", "bad.toml"], code=2)
    assert result.stdout == ""
    assert result.stderr == (
        "ctx: error: bad.toml: stages[1] (truncate_tool_output): max_chars = 10 is invalid: "
        "input should be greater than or equal to 256. "
        "Run 'ctx stages truncate_tool_output' for options.\n"
    )


def test_missing_file_and_bare_config_group() -> None:
    result = invoke(["config", "check", "nope.toml"], code=2)
    assert result.stderr.startswith("ctx: error: nope.toml: config file not found")
    help_result = invoke(["config"], code=2)
    assert "Commands:" in help_result.stderr
    assert "check " in help_result.stderr and "schema " in help_result.stderr


def test_a_preset_is_written_out_stage_by_stage() -> None:
    """The printed config stands alone: the preset's stages, not a second `preset =`."""
    Path("ctx.toml").write_text(
        'preset = "eino"\n\n[[stages]]\nuse = "truncate_tool_output"\nmax_length = 8000\n',
        encoding="utf-8",
    )
    result = invoke(["config", "check"])
    data = tomllib.loads(result.stdout)
    assert "preset" not in data
    assert '# preset "eino": its stages are written out below' in result.stdout
    assert [s["use"] for s in data["stages"]] == ["truncate_tool_output", "clear_tool_results"]
    assert data["stages"][0]["max_chars"] == 8000
    original = load_config("ctx.toml")
    printed = build_config(data, "printed")
    assert printed.stages == original.stages
    assert printed.settings == original.settings.model_copy(update={"preset": None})


OLD = """[[stages]]
use = "truncate_tool_output"
max_length = 9000
[stages.tools.grep]
max_length = 1000

[[stages]]
use = "keep_last"
n = 3

[[stages]]
use = "compress_words"
recent_cutoff = 1
mid_cutoff = 2

[[stages]]
use = "clear_tool_results"
clear_at_least = 100

[[stages]]
use = "head_tail"
keep_recent = 1
"""

NEW = (
    OLD.replace("max_length", "max_chars")
    .replace("n = 3", "keep_messages = 3")
    .replace("recent_cutoff", "recent_calls")
    .replace("mid_cutoff", "mid_calls")
    .replace("clear_at_least", "clear_at_least_tokens")
    .replace("keep_recent", "keep_recent_results")
)


def test_old_option_names_still_work_and_check_names_the_new_ones() -> None:
    Path("old.toml").write_text(OLD, encoding="utf-8")
    Path("new.toml").write_text(NEW, encoding="utf-8")
    _same_pipeline(load_config("old.toml"), load_config("new.toml"))
    old = invoke(["config", "check", "old.toml"])
    new = invoke(["config", "check", "new.toml"])
    assert old.stdout == new.stdout.replace("new.toml", "old.toml")
    assert new.stderr == "ctx: new.toml: valid, 5 stages\n"
    stage = "ctx: old.toml: stages[{}] ({}): "
    assert old.stderr == "".join(
        f"{stage.format(i, name)}{key} is the old name of {now}; it still works, but write "
        f"{now.rsplit('.', 1)[-1]}.\n"
        for i, name, key, now in [
            (1, "truncate_tool_output", "max_length", "max_chars"),
            (1, "truncate_tool_output", "tools.grep.max_length", "tools.grep.max_chars"),
            (2, "keep_last", "n", "keep_messages"),
            (3, "compress_words", "recent_cutoff", "recent_calls"),
            (3, "compress_words", "mid_cutoff", "mid_calls"),
            (4, "clear_tool_results", "clear_at_least", "clear_at_least_tokens"),
            (5, "head_tail", "keep_recent", "keep_recent_results"),
        ]
    ) + ("ctx: old.toml: valid, 5 stages\n")


def test_an_error_names_the_key_as_written_and_both_names_are_refused() -> None:
    Path("old.toml").write_text(
        '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 10\n', encoding="utf-8"
    )
    result = invoke(["config", "check", "old.toml"], code=2)
    assert result.stderr.startswith(
        "ctx: error: old.toml: stages[1] (truncate_tool_output): max_length = 10 is invalid: "
    )
    Path("both.toml").write_text('[[stages]]\nuse = "keep_last"\nn = 2\nkeep_messages = 2\n')
    result = invoke(["config", "check", "both.toml"], code=2)
    assert result.stderr == (
        "ctx: error: both.toml: stages[1] (keep_last): n is the old name of keep_messages: "
        "give only keep_messages. Run 'ctx stages keep_last' for options.\n"
    )
