"""An API key never reaches stdout, stderr, an offloaded file, the manifest or the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxcli.cli import app
from ctxcli.cli.console import redact
from support.fake_api import AnthropicServer, Reply, Request
from support.paths import SAMPLE

SECRET = "sk-ant-api03-TESTSECRET-do-not-leak-0123456789"


def _echoing_failure(request: Request) -> Reply:
    # A hostile endpoint that echoes the key back in its error body.
    return Reply(
        status=401,
        body={
            "type": "error",
            "error": {"type": "authentication_error", "message": f"invalid x-api-key {SECRET}"},
        },
    )


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)


def test_failing_remote_stages_never_print_the_key(keyed: None, tmp_path: Path) -> None:
    with AnthropicServer(_echoing_failure) as server:
        stages = [
            {
                "use": "compress_words",
                "classifier": "anthropic",
                "base_url": server.base_url,
                "recent_calls": 0,
                "mid_calls": 1,
                "min_content_words": 5,
            },
        ]
        from ctxcli.stages import registry

        if "summarize" in registry():
            stages.append(
                {
                    "use": "summarize",
                    "trigger": "always",
                    "keep_messages": 2,
                    "summarizer": "anthropic",
                    "base_url": server.base_url,
                }
            )
        lines = []
        for stage in stages:
            lines.append("[[stages]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in stage.items()]
        Path("ctx.toml").write_text("\n".join(lines) + "\n")
        runner = CliRunner()
        # Named with -c: a config found by looking may not choose where the key goes.
        result = runner.invoke(
            app, ["reduce", str(SAMPLE), "-o", "out.jsonl", "--json", "-c", "ctx.toml"]
        )
        assert result.exit_code == 0, result.stderr
        assert server.count() > 0, "the remote path was not exercised"
        # The key was sent to the server (the SDK's job) ...
        sent = [
            r.headers.get("x-api-key") or r.headers.get("authorization") for r in server.requests
        ]
        assert sent and all(sent), [sorted(r.headers) for r in server.requests]
    # ... and is nowhere in what ctx printed or wrote.
    assert SECRET not in result.stdout and SECRET not in result.stderr
    assert _files_containing(tmp_path, SECRET.encode()) == []


def test_token_count_failure_does_not_print_the_key(keyed: None, tmp_path: Path) -> None:
    with AnthropicServer(_echoing_failure) as server:
        result = CliRunner(env={"ANTHROPIC_BASE_URL": server.base_url}).invoke(
            app, ["stats", str(SAMPLE), "--tokenizer", "anthropic", "--json"]
        )
    assert result.exit_code == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert SECRET not in result.stdout and SECRET not in result.stderr
    assert _files_containing(tmp_path, SECRET.encode()) == []


def test_redact() -> None:
    assert redact("nothing here") == "nothing here"


def test_redact_with_key(keyed: None) -> None:
    assert redact(f"bad key {SECRET}!") == "bad key [redacted]!"
