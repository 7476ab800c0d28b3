"""Help as a person reads it: every command's -h, ctx -h, stages as TOML, one error style."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from pydantic_core import to_jsonable_python
from typer.testing import CliRunner

from ctxcli.cli import app
from ctxcli.stages import registry
from support.paths import REPO

RUNNER = CliRunner()
PANELS = ("Core", "Sessions", "Live", "Config")


def _invoke(args: list[str], **kw: Any) -> Any:
    return RUNNER.invoke(app, args, prog_name="ctx", terminal_width=80, env={"COLUMNS": "80"}, **kw)


def _commands(command: Any = None, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand of the app, as the words that name it."""
    command = command or typer.main.get_command(app)
    found = [path]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands()
# What Typer prints when it shows a Python type instead of a metavar.
PYTHON_TYPES = re.compile(r"<typing\.|object at 0x|<[a-z][a-z_ ]*(\[[^\]]*\])?>|\{[a-z_]+\}")


def test_the_walk_sees_every_command() -> None:
    assert {"reduce", "stats", "cost", "proxy", "wrap", "mcp"} <= {p[0] for p in COMMANDS if p}
    assert ("config", "check") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "ctx")
def test_help_names_values_not_python_types(path: tuple[str, ...]) -> None:
    result = _invoke([*path, "-h"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert not PYTHON_TYPES.findall(text), text
    usage = next(line for line in text.splitlines() if line.startswith("Usage:"))
    assert "...]..." not in usage and "{" not in usage, usage
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_reduce_usage_reads_as_click_shows_it() -> None:
    usage = _invoke(["reduce", "-h"]).output.splitlines()[0]
    assert usage == "Usage: ctx reduce [OPTIONS] [INPUT]..."


def test_format_help_lists_every_format_the_error_lists() -> None:
    sample = str(REPO / "sample_transcripts" / "openai_chat_support.jsonl")
    result = _invoke(["stats", "--format", "no-such-format", sample])
    assert result.exit_code == 2
    listed = re.search(r"choose one of (.*)$", result.output.strip(), re.M)
    assert listed, result.output
    error_names = [n.strip() for n in listed[1].split(",")]
    help_text = " ".join(_invoke(["stats", "-h"]).output.split())
    shown = re.search(
        r"--format NAME Transcript format \(default: auto-detect\): ([^.]*)\.", help_text
    )
    assert shown, help_text
    assert [n.strip() for n in shown[1].split(",")] == error_names
    assert "taubench_runs" in error_names  # the collections too, which the help left out


def test_top_help_groups_commands_with_whole_summaries() -> None:
    text = _invoke(["-h"]).output
    headings = [line[:-1] for line in text.splitlines() if line in {f"{p}:" for p in PANELS}]
    assert headings == list(PANELS)
    assert "…" not in text and "..." not in text.split("Core:")[1]
    flat = " ".join(text.split())
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        summary = command.get_short_help_str(limit=1_000)
        assert f"{name} {summary}" in flat, f"{name}: summary cut or missing"
    assert all(len(line) <= 80 for line in text.splitlines())


@pytest.mark.parametrize("name", sorted(registry()))
def test_stage_options_print_as_toml_config_check_accepts(name: str, tmp_path: Path) -> None:
    result = _invoke(["stages", name])
    assert result.exit_code == 0, result.output
    assert "``" not in result.output
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
    toml_text = result.stdout[result.stdout.index("[[stages]]") :]
    loaded = tomllib.loads(toml_text)["stages"][0]
    spec = registry()[name]
    for field, info in spec.options.model_fields.items():
        default = to_jsonable_python(info.get_default(call_default_factory=True))
        if default is not None:
            assert loaded[field] == default, field
    path = tmp_path / "ctx.toml"
    path.write_text(toml_text, encoding="utf-8")
    check = _invoke(["config", "check", str(path)])
    assert check.exit_code == 0, check.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["reduce", "--no-such-flag"], "no such option: --no-such-flag"),
        (["no-such-command"], "no such command 'no-such-command'"),
        (["stats", "--jobs", "0", "x.jsonl"], "invalid value for '--jobs'"),
        (["wrap"], "missing argument 'client'"),
    ],
)
def test_usage_errors_are_one_ctx_error_line(args: list[str], says: str) -> None:
    result = _invoke(args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctx: error: "), result.stderr
    assert says in lines[0].lower()
    assert "Usage:" not in result.stderr and "Error:" not in result.stderr


def test_stages_and_presets_answer_in_json() -> None:
    listed = orjson.loads(_invoke(["stages", "--json"]).stdout)
    assert {s["name"] for s in listed["stages"]} == set(registry())
    one = orjson.loads(_invoke(["stages", "clear_tool_results", "--json"]).stdout)
    options = {o["name"]: o for o in one["options"]}
    assert options["max_tokens"]["type"] == "int" and options["max_tokens"]["default"] == "30000"
    assert options["hint"]["default"] == '"short"'
    presets = orjson.loads(_invoke(["presets", "--json"]).stdout)["presets"]
    assert {"live", "claude-code-resume"} <= {p["name"] for p in presets}
    preset = orjson.loads(_invoke(["presets", "live", "--json"]).stdout)
    assert tomllib.loads(preset["toml"])["stages"]


def test_restore_answers_in_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "t.jsonl"
    src.write_bytes(
        b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "'
        + b"x " * 4000
        + b'"}\n'
    )
    assert _invoke(["reduce", "t.jsonl", "-o", "r.jsonl", "-q"]).exit_code == 0
    refused = _invoke(["restore", "r.jsonl", "--json"])
    assert refused.exit_code == 2 and "-o FILE" in refused.stderr
    result = _invoke(["restore", "r.jsonl", "-o", "back.jsonl", "--json"])
    assert result.exit_code == 0, result.output
    entry = orjson.loads(result.stdout)["files"][0]
    assert entry["output"] == "back.jsonl" and entry["bytes"] == src.stat().st_size
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()
