"""A config found by looking may not choose where data goes (issue 41 item 9, security).

A ctx.toml in a cloned repository (or ``[tool.ctx]`` in a parent pyproject.toml) with a
summarize stage whose ``base_url`` points elsewhere made ``ctx stats session.jsonl`` -- a
preview -- send the transcript and ANTHROPIC_API_KEY there. The loopback fake API stands
for "elsewhere": with a found config no request, and no key, ever reaches it; a config
the user names (``-c``, ``CTX_CONFIG``) still may send there. Which config ran is said
on stderr (one line) and in ``--json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.pipeline.config import load_config
from support.cli import invoke
from support.fake_api import AnthropicServer

KEY = "sk-ant-test-must-never-leave"


def _chain(base_url: str) -> str:
    return (
        "[[stages]]\n"
        'use = "summarize"\n'
        'summarizer = "anthropic"\n'
        'trigger = "always"\n'
        "keep_messages = 1\n"
        "max_retries = 0\n"
        "timeout_seconds = 5\n"
        f'base_url = "{base_url}"\n'
    )


def _session(path: Path) -> Path:
    lines = [{"role": "user", "content": f"step {i}: " + "word " * 40} for i in range(8)]
    path.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    return path


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicServer]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("CTX_CONFIG", raising=False)
    with AnthropicServer(lifetime_s=120) as server:
        yield server


def _refused(result: object, where: str) -> None:
    err = result.stderr  # type: ignore[attr-defined]
    assert f"ctx: error: {where}: stages[1] (summarize): base_url = 'http://127.0.0.1:" in err
    assert "may not choose a network destination" in err
    assert "name it with -c (or CTX_CONFIG)" in err


def test_a_found_ctx_toml_cannot_send_the_transcript_elsewhere(elsewhere: AnthropicServer) -> None:
    Path("ctx.toml").write_text(_chain(elsewhere.base_url))
    _session(Path("s.jsonl"))
    for args in (["stats", "s.jsonl"], ["reduce", "s.jsonl", "-o", "out.jsonl"]):
        _refused(invoke(args, code=2), str(Path("ctx.toml").resolve()))
    assert elsewhere.count() == 0
    assert not Path("out.jsonl").exists()


def test_tool_ctx_in_a_parent_pyproject_cannot_either(
    elsewhere: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = Path("clone").resolve()
    (project / ".git").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        "[tool.ctx]\n" + _chain(elsewhere.base_url).replace("[[stages]]", "[[tool.ctx.stages]]")
    )
    (project / "docs").mkdir()
    _session(project / "docs" / "s.jsonl")
    monkeypatch.chdir(project / "docs")
    _refused(invoke(["stats", "s.jsonl"], code=2), f"{project / 'pyproject.toml'} [tool.ctx]")
    assert elsewhere.count() == 0


def test_a_named_config_may_choose_the_destination(
    elsewhere: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    Path("chain.toml").write_text(_chain(elsewhere.base_url))
    _session(Path("s.jsonl"))
    named = invoke(["stats", "s.jsonl", "-c", "chain.toml"])
    assert "ctx: config" not in named.stderr  # the user named it: nothing to say
    monkeypatch.setenv("CTX_CONFIG", "chain.toml")
    by_env = invoke(["stats", "s.jsonl", "--json"])
    assert "ctx: config chain.toml (named by CTX_CONFIG)\n" in by_env.stderr
    assert json.loads(by_env.stdout)["config"] == "chain.toml"
    assert elsewhere.count() > 0 and all(r.credential for r in elsewhere.requests)


def test_which_found_config_ran_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    Path("ctx.toml").write_text('[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 500\n')
    _session(Path("s.jsonl"))
    found = str(Path("ctx.toml").resolve())
    result = invoke(["stats", "s.jsonl", "--json"])
    assert result.stderr.count(f"ctx: config {found} (found; -c names another)\n") == 1
    assert json.loads(result.stdout)["config"] == found
    quiet = invoke(["reduce", "s.jsonl", "-o", "out.jsonl", "-q"])
    assert quiet.stderr == ""
    assert json.loads(invoke(["stats", "s.jsonl", "--json", "--preset", "eino"]).stdout)[
        "config"
    ] == (f"{found} with preset eino")
    Path("ctx.toml").unlink()
    assert json.loads(invoke(["stats", "s.jsonl", "--json"]).stdout)["config"] == "defaults"


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ('offload_dir = "s3://somebody-elses-bucket/x"\n', "offload_dir"),
        (
            '[[stages]]\nuse = "compress_words"\nclassifier = "anthropic"\n'
            'base_url = "https://collector.example/v1"\n',
            "stages[1] (compress_words): base_url",
        ),
    ],
)
def test_every_network_destination_of_a_found_config_is_refused(setting: str, key: str) -> None:
    Path("ctx.toml").write_text(setting)
    with pytest.raises(
        ConfigError, match=rf"ctx\.toml: {re.escape(key)} = .* a network destination"
    ):
        load_config()
    # Named, the same file loads.
    assert load_config("ctx.toml").origin == "argument"


def test_the_sdk_default_host_is_not_elsewhere() -> None:
    Path("ctx.toml").write_text(_chain("https://api.anthropic.com"))
    config = load_config()
    assert config.origin == "discovery" and config.stages[0].use == "summarize"
