"""The JSON Schema of ctx.toml: current, and accepting exactly what ctx accepts."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import Field

import ctxcli.stages as stages_pkg
from ctxcli.core.errors import ConfigError
from ctxcli.pipeline.config import INIT_TEMPLATE, build_config, default_config
from ctxcli.pipeline.schema import config_schema, config_to_dict, schema_text, shipped_schema_text
from ctxcli.stages import StageOptions, StageResult, register
from support.cli import invoke
from support.paths import REPO

SHIPPED = REPO / "src" / "ctxcli" / "ctx.schema.json"
CASE_CONFIGS = sorted((REPO / "tests" / "cases").glob("**/config.toml"))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SHIPPED.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_shipped_schema_is_current() -> None:
    """Fails when a stage or setting changed without `make schema`."""
    assert SHIPPED.read_text(encoding="utf-8") == schema_text(include_plugins=False), (
        "src/ctxcli/ctx.schema.json is stale: run 'make schema' and commit it"
    )


def test_generate_script_check_mode(tmp_path: Path) -> None:
    script = REPO / "scripts" / "generate_schema.py"
    done = subprocess.run(
        [sys.executable, script, "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "ctx.schema.json is up to date\n"


def test_package_resource_and_cli_print_the_same_schema() -> None:
    assert shipped_schema_text() == SHIPPED.read_text(encoding="utf-8")
    result = invoke(["config", "schema"])
    assert result.stdout == shipped_schema_text()
    assert result.stderr == ""


def test_every_registered_stage_is_a_branch() -> None:
    schema = config_schema()
    branches = schema["properties"]["stages"]["items"]["oneOf"]
    names = [b["$ref"].split("stage:", 1)[1] for b in branches]
    assert names == sorted(stages_pkg.registry())
    for name in names:
        branch = schema["$defs"][f"stage:{name}"]
        assert branch["properties"]["use"] == {"const": name, "description": "The stage to run."}
        assert branch["additionalProperties"] is False
        assert "use" in branch["required"]


def _accepted_by_ctx(data: dict[str, Any]) -> bool:
    try:
        build_config(data, "test")
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize(
    "path", CASE_CONFIGS, ids=[str(p.parent.relative_to(REPO / "tests")) for p in CASE_CONFIGS]
)
def test_golden_case_configs_are_valid(validator: Draft202012Validator, path: Path) -> None:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert _accepted_by_ctx(data)
    assert list(validator.iter_errors(data)) == []


def test_init_template_and_defaults_are_valid(validator: Draft202012Validator) -> None:
    assert list(validator.iter_errors(tomllib.loads(INIT_TEMPLATE))) == []
    assert list(validator.iter_errors(config_to_dict(default_config()))) == []


@pytest.mark.parametrize(
    "data",
    [
        {"tokeniser": "cl100k"},
        {"tokenizer": "gpt2"},
        {"stages": [{"use": "no_such_stage"}]},
        {"stages": [{"max_chars": 1000}]},
        {"stages": [{"use": "truncate_tool_output", "max_chars": 10}]},
        {"stages": [{"use": "truncate_tool_output", "max_lenght": 1000}]},
        {"stages": [{"use": "truncate_tool_output", "tools": {"grep": {"max_len": 300}}}]},
        {"stages": {"use": "truncate_tool_output"}},
        {"stages": [{"use": "keep_last", "n": 3, "keep_messages": 3}]},
        {
            "stages": [
                {"use": "truncate_tool_output", "tools": {"a": {"max_chars": 9, "max_length": 9}}}
            ]
        },
    ],
    ids=[
        "unknown-key",
        "bad-tokenizer",
        "unknown-stage",
        "missing-use",
        "below-minimum",
        "unknown-option",
        "unknown-override-option",
        "stages-not-array",
        "old-and-new-name",
        "old-and-new-override-name",
    ],
)
def test_what_ctx_rejects_the_schema_rejects(
    validator: Draft202012Validator, data: dict[str, Any]
) -> None:
    assert not _accepted_by_ctx(data)
    assert list(validator.iter_errors(data)) != []


OLD_NAMES = [
    {"use": "truncate_tool_output", "max_length": 9000, "tools": {"grep": {"max_length": 900}}},
    {"use": "keep_last", "n": 3},
    {"use": "strip_and_truncate", "n": 3},
    {"use": "compress_words", "recent_cutoff": 1, "mid_cutoff": 2},
    {"use": "clear_tool_results", "clear_at_least": 100},
    {"use": "head_tail", "keep_recent": 1},
]


@pytest.mark.parametrize("stage", OLD_NAMES, ids=[s["use"] for s in OLD_NAMES])
def test_old_option_names_are_accepted_and_marked_deprecated(
    validator: Draft202012Validator, stage: dict[str, Any]
) -> None:
    data = {"stages": [stage]}
    assert _accepted_by_ctx(data)
    assert list(validator.iter_errors(data)) == []
    branch = json.loads(SHIPPED.read_text(encoding="utf-8"))["$defs"][f"stage:{stage['use']}"]
    old = [k for k in stage if k not in ("use", "tools")]
    assert all(branch["properties"][k]["deprecated"] is True for k in old)


class _ProbeOptions(StageOptions):
    """Options of a stage defined by a test."""

    depth_lines: int = Field(3, ge=1, description="How deep to probe.")


@pytest.fixture
def own_stages() -> Iterator[None]:
    """The stage registry as the built-ins make it, before and after the test."""
    stages_pkg.STAGE_REGISTRY.reset()
    yield
    stages_pkg.STAGE_REGISTRY.reset()


def test_plugin_stages_join_the_printed_schema(own_stages: None) -> None:
    """`ctx config schema` describes installed plugins; the shipped file does not."""

    @register("probe_schema", options=_ProbeOptions)
    def probe_schema(conv: Any, opts: _ProbeOptions, ctx: Any) -> StageResult:
        """Probe."""
        return StageResult(conv)

    printed = json.loads(invoke(["config", "schema"]).stdout)
    branch = printed["$defs"]["stage:probe_schema"]
    assert branch["properties"]["depth_lines"]["minimum"] == 1
    validator = Draft202012Validator(printed)
    assert validator.is_valid({"stages": [{"use": "probe_schema", "depth_lines": 2}]})
    assert not validator.is_valid({"stages": [{"use": "probe_schema", "depth_lines": 0}]})
    assert "stage:probe_schema" not in json.loads(schema_text(include_plugins=False))["$defs"]
