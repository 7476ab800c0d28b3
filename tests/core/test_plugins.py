"""Third-party stages and formats: entry points in ``ctxcli.stages.v1`` and ``ctxcli.formats.v1``
join the same registries as the built-ins, through the same register path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxcli.formats as formats_pkg
import ctxcli.stages as stages_pkg
from ctxcli.core.errors import ConfigError
from ctxcli.pipeline.config import load_config
from support.cli import invoke
from support.paths import REPO

PLUGIN_SRC = REPO / "tests" / "plugin_example"
FORMAT_PLUGIN_SRC = REPO / "tests" / "plugin_format_example"
EMAILS = [
    {"role": "user", "content": "Who reported the outage?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_tickets", "arguments": '{"q": "outage"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "ticket 41 by ada@example.com, cc grace.hopper@navy.example.org",
    },
    {"role": "assistant", "content": "Ada (ada@example.com) reported it."},
]
PLUGIN_CONFIG = """\
[[stages]]
use = "redact_emails"
replacement = "<redacted>"

[[stages]]
use = "truncate_tool_output"
"""


def _pip_install(example: Path, work: Path) -> Path:
    """An example plugin installed with pip into a private directory (not the venv).

    A copy is built, so the source tree gets no build/ or egg-info; ``--target``
    keeps the shared virtualenv untouched while still writing real dist-info
    metadata with the entry point, which is all ctx looks at.
    """
    src = work / "src"
    shutil.copytree(example, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    site = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", site, src],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return site


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/plugin_example (a stage) installed into a private directory."""
    site = _pip_install(PLUGIN_SRC, tmp_path_factory.mktemp("plugin"))
    assert list(site.glob("ctx_redact_emails-*.dist-info/entry_points.txt"))
    return site


@pytest.fixture(scope="session")
def format_plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/plugin_format_example (a format) installed into a private directory."""
    site = _pip_install(FORMAT_PLUGIN_SRC, tmp_path_factory.mktemp("format_plugin"))
    assert list(site.glob("ctx_chatlog_format-*.dist-info/entry_points.txt"))
    return site


def _ctx(args: list[str], cwd: Path, site: Path | None, *, plugins: bool = True) -> Any:
    env = {k: v for k, v in os.environ.items() if k not in ("CTX_NO_PLUGINS", "PYTHONPATH")}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    if not plugins:
        env["CTX_NO_PLUGINS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "ctxcli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _session(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in EMAILS), encoding="utf-8")
    return path


def test_installed_plugin_runs_from_toml_config(plugin_site: Path, tmp_path: Path) -> None:
    src = _session(tmp_path / "session.jsonl")
    (tmp_path / "ctx.toml").write_text(PLUGIN_CONFIG, encoding="utf-8")
    done = _ctx(["reduce", "session.jsonl", "-o", "out.jsonl", "--json"], tmp_path, plugin_site)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["files"][0]
    assert [s["stage"] for s in report["stages"]] == ["redact_emails", "truncate_tool_output"]
    assert report["stages"][0]["counters"] == {"redacted": 2}
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out[2]["content"] == "ticket 41 by <redacted>, cc <redacted>"
    # Default kinds = tool results only: the assistant's text keeps its address.
    assert out[3] == EMAILS[3]
    restored = _ctx(["restore", "out.jsonl", "-o", "back.jsonl"], tmp_path, plugin_site)
    assert restored.returncode == 0, restored.stderr
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


def test_plugin_options_are_validated_like_builtins(plugin_site: Path, tmp_path: Path) -> None:
    _session(tmp_path / "session.jsonl")
    (tmp_path / "ctx.toml").write_text(
        '[[stages]]\nuse = "redact_emails"\nreplacment = "x"\n', encoding="utf-8"
    )
    done = _ctx(["stats", "session.jsonl"], tmp_path, plugin_site)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"ctx: error: {tmp_path / 'ctx.toml'}: stages[1] (redact_emails): unknown option "
        "'replacment'; did you mean 'replacement'? Run 'ctx stages redact_emails' for options.\n"
    )


def test_plugin_listed_with_its_package(plugin_site: Path, tmp_path: Path) -> None:
    listing = _ctx(["stages"], tmp_path, plugin_site)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("redact_emails "))
    # The entry and the lines it wraps onto (the listing fits 80 columns).
    entry = [lines[at]]
    for line in lines[at + 1 :]:
        if not line.startswith(" "):
            break
        entry.append(line.strip())
    assert "(plugin ctx-redact-emails)" in " ".join(entry)
    detail = _ctx(["stages", "redact_emails"], tmp_path, plugin_site)
    assert "Applies to:" in detail.stdout
    assert "\n\nFrom plugin package ctx-redact-emails.\n\nIn ctx.toml" in detail.stdout
    assert 'replacement = "[email]"' in detail.stdout


def test_ctx_no_plugins_skips_entry_points(plugin_site: Path, tmp_path: Path) -> None:
    _session(tmp_path / "session.jsonl")
    (tmp_path / "ctx.toml").write_text(PLUGIN_CONFIG, encoding="utf-8")
    listing = _ctx(["stages"], tmp_path, plugin_site, plugins=False)
    assert "redact_emails" not in listing.stdout
    done = _ctx(["stats", "session.jsonl"], tmp_path, plugin_site, plugins=False)
    assert done.returncode == 2
    assert f"{tmp_path / 'ctx.toml'}: stages[1]: unknown stage 'redact_emails'" in done.stderr


# --- a format plugin: tests/plugin_format_example -------------------------------------

CHATLOG = [
    {"who": "user", "says": "Find the outage ticket."},
    {
        "who": "agent",
        "says": "Searching.",
        "calls": [{"id": "c1", "tool": "search", "args": '{"q": "outage"}'}],
    },
    {"who": "tool", "id": "c1", "tool": "search", "says": "ticket 41\n" + "log line\n" * 300},
    {"who": "agent", "says": "Ticket 41 it is.", "mood": "relieved"},
]
TRUNCATE_CONFIG = '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 300\n'


def _chatlog(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in CHATLOG), encoding="utf-8")
    return path


def test_installed_format_plugin_is_detected_reduced_and_restored(
    format_plugin_site: Path, tmp_path: Path
) -> None:
    src = _chatlog(tmp_path / "log.jsonl")
    (tmp_path / "ctx.toml").write_text(TRUNCATE_CONFIG, encoding="utf-8")
    done = _ctx(["reduce", "log.jsonl", "-o", "out.jsonl", "--json"], tmp_path, format_plugin_site)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["files"][0]
    assert report["format"] == "chatlog"
    assert report["stages"][0]["counters"]["truncated"] == 1
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert "[ctx: output truncated" in out[2]["says"]
    assert out[3] == CHATLOG[3]  # an untouched line keeps its unknown field
    restored = _ctx(["restore", "out.jsonl", "-o", "back.jsonl"], tmp_path, format_plugin_site)
    assert restored.returncode == 0, restored.stderr
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


def test_format_plugin_chosen_by_name_and_gone_without_plugins(
    format_plugin_site: Path, tmp_path: Path
) -> None:
    _chatlog(tmp_path / "log.jsonl")
    named = _ctx(
        ["stats", "log.jsonl", "--format", "chatlog", "--json"], tmp_path, format_plugin_site
    )
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["files"][0]["format"] == "chatlog"
    off = _ctx(["stats", "log.jsonl"], tmp_path, format_plugin_site, plugins=False)
    assert off.returncode == 2
    assert "unrecognised transcript format (known: claude_code, codex," in off.stderr
    assert "chatlog" not in off.stderr


def test_format_plugins_are_tried_after_every_builtin(format_plugin_site: Path) -> None:
    """Installing a format never changes how a transcript that loads today is read."""
    code = (
        "import ctxcli.formats as f; import ctx_chatlog_format as c; "
        "print(list(f.registry())); print(f.FORMAT_REGISTRY.package('chatlog')); "
        "print(type(f.get_format('chatlog')) is c.ChatLog)"
    )
    env = {k: v for k, v in os.environ.items() if k != "CTX_NO_PLUGINS"}
    env["PYTHONPATH"] = str(format_plugin_site)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    names, package, same = done.stdout.splitlines()
    builtins = [
        "claude_code",
        "codex",
        "langchain",
        "anthropic",
        "openai_chat",
        "json_doc",
        "openhands",
    ]
    assert names == str([*builtins, "chatlog"])
    assert package == "ctx-chatlog-format"
    assert same == "True"


# --- in-process: plugins written as bare dist-info directories on sys.path -----------


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A registry holding only the built-ins, plugins enabled, and a site dir on sys.path."""
    registries = (stages_pkg.STAGE_REGISTRY, formats_pkg.FORMAT_REGISTRY)
    for registry in registries:
        registry.reset()
    monkeypatch.delenv("CTX_NO_PLUGINS")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if name.startswith("fakeplug"):
            del sys.modules[name]
    for registry in registries:
        registry.reset()


def _fake_dist(
    site: Path,
    dist: str,
    module: str,
    source: str,
    value: str | None = None,
    group: str = "ctxcli.stages.v1",
) -> None:
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{group}]\n{module} = {value or module}\n", encoding="utf-8"
    )
    (site / f"{module}.py").write_text(source, encoding="utf-8")


STAGE_SRC = '''
from pydantic import BaseModel
from ctxcli.stages import StageOptions, StageResult, register

class Opts(StageOptions):
    """Options."""

@register({name!r}, options={options})
def stage(conv, opts, ctx):
    """Do nothing."""
    return StageResult(conv)
'''


def test_duplicate_stage_name_names_both_packages(fresh_registry: Path) -> None:
    _fake_dist(
        fresh_registry,
        "fakeplug-dup",
        "fakeplug_dup",
        STAGE_SRC.format(name="truncate_tool_output", options="Opts"),
    )
    with pytest.raises(ConfigError) as err:
        stages_pkg.registry()
    assert str(err.value) == (
        "stage 'truncate_tool_output' is defined twice: by ctxcli and by fakeplug-dup; "
        "uninstall one of them or set CTX_NO_PLUGINS=1."
    )


def test_duplicate_is_a_usage_error_on_the_cli(fresh_registry: Path) -> None:
    _fake_dist(
        fresh_registry,
        "fakeplug-dup2",
        "fakeplug_dup2",
        STAGE_SRC.format(name="clear_tool_results", options="Opts"),
    )
    result = invoke(["stages"], code=2)
    assert result.stdout == ""
    assert "by ctxcli and by fakeplug-dup2" in result.stderr


def test_broken_plugin_is_one_line_naming_it(fresh_registry: Path) -> None:
    _fake_dist(fresh_registry, "fakeplug-broken", "fakeplug_broken", "import not_a_module_xyz\n")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert str(err.value) == (
        "entry point fakeplug_broken = 'fakeplug_broken' of package fakeplug-broken failed to "
        "load (ModuleNotFoundError: No module named 'not_a_module_xyz'); fix or uninstall the "
        "plugin, or set CTX_NO_PLUGINS=1 to run without plugins."
    )


def test_entry_point_that_registers_nothing(fresh_registry: Path) -> None:
    _fake_dist(fresh_registry, "fakeplug-empty", "fakeplug_empty", "X = 1\n")
    with pytest.raises(ConfigError, match="registers no stage; decorate a function"):
        stages_pkg.registry()


def test_plugin_options_must_be_stage_options(fresh_registry: Path) -> None:
    _fake_dist(
        fresh_registry,
        "fakeplug-loose",
        "fakeplug_loose",
        STAGE_SRC.format(name="loose", options="BaseModel"),
    )
    with pytest.raises(ConfigError, match="options must subclass ctxcli.stages.StageOptions"):
        stages_pkg.registry()


def test_entry_point_naming_a_function_and_plugin_order(fresh_registry: Path) -> None:
    _fake_dist(
        fresh_registry,
        "fakeplug-fn",
        "fakeplug_fn",
        STAGE_SRC.format(name="zzz_noop", options="Opts"),
        value="fakeplug_fn:stage",
    )
    names = list(stages_pkg.registry())
    assert names[-1] == "zzz_noop"
    assert stages_pkg.registry()["zzz_noop"].package == "fakeplug-fn"
    config = _load_config_from_text('[[stages]]\nuse = "zzz_noop"\n')
    assert [s.use for s in config.stages] == ["zzz_noop"]


def _load_config_from_text(text: str) -> Any:
    path = Path("ctx.toml")
    path.write_text(text, encoding="utf-8")
    return load_config(path)


FORMAT_SRC = '''
from ctxcli.formats import register_format
from ctxcli.formats.openai_chat import OpenAIChat

@register_format
class Chat(OpenAIChat):
    """A second reader of OpenAI chat lines."""
    name = {name!r}
'''


def test_duplicate_format_name_names_both_packages(fresh_registry: Path) -> None:
    _fake_dist(
        fresh_registry,
        "fakeplug-fmt",
        "fakeplug_fmt",
        FORMAT_SRC.format(name="openai_chat"),
        group="ctxcli.formats.v1",
    )
    with pytest.raises(ConfigError) as err:
        formats_pkg.registry()
    assert str(err.value) == (
        "format 'openai_chat' is defined twice: by ctxcli and by fakeplug-fmt; "
        "uninstall one of them or set CTX_NO_PLUGINS=1."
    )


def test_format_entry_point_that_registers_nothing(fresh_registry: Path) -> None:
    _fake_dist(
        fresh_registry, "fakeplug-nofmt", "fakeplug_nofmt", "X = 1\n", group="ctxcli.formats.v1"
    )
    with pytest.raises(ConfigError) as err:
        formats_pkg.load(b'{"role": "user", "content": "hi"}\n')
    assert str(err.value) == (
        "entry point fakeplug_nofmt = 'fakeplug_nofmt' of package fakeplug-nofmt registers no "
        "format; decorate a Format subclass in fakeplug_nofmt with "
        "@ctxcli.formats.register_format."
    )


def test_format_plugin_shadowed_by_a_builtin_sniff_is_still_named(fresh_registry: Path) -> None:
    """A plugin reading lines openai_chat also accepts: auto-detection keeps the built-in."""
    _fake_dist(
        fresh_registry,
        "fakeplug-chat2",
        "fakeplug_chat2",
        FORMAT_SRC.format(name="chat2"),
        group="ctxcli.formats.v1",
    )
    raw = b'{"role": "user", "content": "hi"}\n'
    assert formats_pkg.load(raw).format.name == "openai_chat"
    assert formats_pkg.load(raw, format="chat2").format.name == "chat2"
    assert formats_pkg.FORMAT_REGISTRY.package("chat2") == "fakeplug-chat2"


STAGES_IMPORT = "from ctxcli.stages import Conversation, Kind, StageContext, StageOptions, StageResult, register"


def test_plugin_example_works_from_the_plugin_facing_module(fresh_registry: Path) -> None:
    """The README's plugin imports the model types from ctxcli.stages, the one plugin module."""
    source = (PLUGIN_SRC / "ctx_redact_emails.py").read_text(encoding="utf-8")
    assert STAGES_IMPORT in source  # the example shows the plugin-facing module
    module = "fakeplug_redact_stages"
    _fake_dist(fresh_registry, module.replace("_", "-"), module, source)
    from ctxcli import reduce_row

    done = reduce_row(EMAILS, {"stages": [{"use": "redact_emails"}]})
    assert done.value[2]["content"] == "ticket 41 by [email], cc [email]"
    assert stages_pkg.registry()["redact_emails"].package == module.replace("_", "-")
    plugin = sys.modules[module]
    assert plugin.Conversation is stages_pkg.Conversation and plugin.Kind is stages_pkg.Kind


def test_reset_keeps_only_the_builtins_and_loads_plugins_again(fresh_registry: Path) -> None:
    registry = stages_pkg.STAGE_REGISTRY
    builtins = list(registry.items())
    loaded = registry.loaded
    source = STAGE_SRC.format(name="plugged_in", options="Opts")
    _fake_dist(fresh_registry, "fakeplug-reset", "fakeplug_reset", source)
    # A script's own stage: a module imported by hand, not named by an entry point.
    (fresh_registry / "fakeplug_script.py").write_text(source.replace("plugged_in", "by_script"))
    registry.reset()  # the entry point written above loads on the next call
    import fakeplug_script  # noqa: F401

    names = list(registry.items())
    assert names[: len(builtins)] == builtins
    assert set(names[len(builtins) :]) == {"plugged_in", "by_script"}
    registry.reset()
    assert list(registry.loaded) == builtins and registry.loaded is loaded
    del sys.modules["fakeplug_reset"]  # imported afresh, the plugin registers again
    assert registry.items()["plugged_in"].package == "fakeplug-reset"
    assert "by_script" not in registry.items()
