"""Config discovery and every error message, asserted verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.pipeline.config import build_config, default_config, load_config
from ctxcli.pipeline.presets import preset_names
from support.paths import CASES


def _err(text: str, name: str = "ctx.toml") -> str:
    Path(name).write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(Path(name))
    return str(info.value)


def test_defaults_are_eino_defaults() -> None:
    config = default_config()
    assert config.settings.tokenizer == "cl100k"
    assert config.settings.language == "en"
    assert [s.use for s in config.stages] == ["truncate_tool_output", "clear_tool_results"]
    trunc, clear = (s.options for s in config.stages)
    assert trunc.max_chars == 50000 and trunc.read_tool_name == "read_file"  # type: ignore[attr-defined]
    assert clear.max_tokens == 30000 and clear.keep_rounds == 1  # type: ignore[attr-defined]


def test_discovery_order(tmp_path: Path) -> None:
    assert load_config().source == "defaults"
    Path("pyproject.toml").write_text('[tool.ctx]\ntokenizer = "approx"\n')
    assert load_config().settings.tokenizer == "approx"
    assert "[tool.ctx]" in load_config().source
    Path("ctx.toml").write_text('tokenizer = "o200k"\n')
    assert load_config().settings.tokenizer == "o200k"
    Path("other.toml").write_text('language = "zh"\n')
    assert load_config(Path("other.toml")).settings.language == "zh"


def test_pyproject_in_parent_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Path("pyproject.toml").write_text('[tool.ctx]\nlanguage = "zh"\n')
    sub = Path("a/b")
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert load_config().settings.language == "zh"


def test_pyproject_without_tool_ctx_means_defaults() -> None:
    Path("pyproject.toml").write_text('[project]\nname = "x"\n')
    assert load_config().source == "defaults"


def test_stage_options_and_per_tool_overrides() -> None:
    Path("ctx.toml").write_text(
        '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 20000\n'
        "[stages.tools.grep]\nmax_length = 1000\n[stages.tools.read_file]\nskip = true\n"
    )
    opts = load_config(Path("ctx.toml")).stages[0].options
    assert opts.tools["grep"].max_chars == 1000  # type: ignore[attr-defined]
    assert opts.tools["read_file"].skip  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'tokenizer = "gpt2"\n',
            "ctx.toml: tokenizer = 'gpt2' is invalid: input should be 'cl100k', 'o200k', 'approx' "
            "or 'anthropic'",
        ),
        (
            "max_tokens = 3\n",
            "ctx.toml: unknown key 'max_tokens'; it is an option of stage 'clear_tool_results': "
            'put it under [[stages]] with use = "clear_tool_results".',
        ),
        ("tokeniser = 'x'\n", "ctx.toml: unknown key 'tokeniser'; did you mean 'tokenizer'?"),
        (
            "zzz = 1\n",
            "ctx.toml: unknown key 'zzz'; valid keys: format, incremental, language, made_for, offload_dir, preset, stages, "
            "tokenizer.",
        ),
        (
            '[[stages]]\nuse = "truncate_tool_outptu"\n',
            "ctx.toml: stages[1]: unknown stage 'truncate_tool_outptu'; did you mean "
            "'truncate_tool_output'? valid stages: ",
        ),
        (
            '[[stages]]\nuse = "clear_tool_results"\nkeep_rounds = -1\n',
            "ctx.toml: stages[1] (clear_tool_results): keep_rounds = -1 is invalid: input should "
            "be greater than or equal to 0. Run 'ctx stages clear_tool_results' for options.",
        ),
        (
            '[[stages]]\nuse = "truncate_tool_output"\nmax_lenght = 10\n',
            "ctx.toml: stages[1] (truncate_tool_output): unknown option 'max_lenght'; did you mean "
            "'max_chars'? Run 'ctx stages truncate_tool_output' for options.",
        ),
        (
            '[[stages]]\nuse = "truncate_tool_output"\n[stages.tools.grep]\nmax_lenth = 1\n',
            "ctx.toml: stages[1] (truncate_tool_output): unknown option 'tools.grep.max_lenth'; did "
            "you mean 'max_chars'? Run 'ctx stages truncate_tool_output' for options.",
        ),
        ("stages = 3\n", "ctx.toml: 'stages' must be an array of tables ([[stages]])."),
        (
            "[[stages]]\nmax_length = 3\n",
            'ctx.toml: stages[1]: each stage needs use = "<stage name>".',
        ),
        ("x = [\n", "ctx.toml: invalid TOML: "),
    ],
)
def test_error_messages(text: str, message: str) -> None:
    assert _err(text).startswith(message)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match=r"^nope.toml: config file not found"):
        load_config(Path("nope.toml"))


def test_cli_override_validated() -> None:
    with pytest.raises(ConfigError, match="tokenizer = 'bogus' is invalid"):
        default_config().with_overrides(tokenizer="bogus")
    assert default_config().with_overrides(tokenizer="approx").settings.tokenizer == "approx"


def test_presets_and_golden_cases_use_the_new_option_names() -> None:
    """Old option names are for users' files only: nothing shipped or golden uses one."""
    for name in preset_names():
        assert build_config({"preset": name}, name).notes == (), name
    for path in sorted(CASES.glob("**/config.toml")):
        assert load_config(path).notes == (), path
