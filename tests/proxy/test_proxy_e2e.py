"""The real Claude Code CLI, run through ``ctx wrap claude`` against a scripted fake Anthropic API.

A 40-step tool-heavy run (Read and Bash on large files that the CLI really executes in a
temporary project); the fake server rejects what the real API rejects and simulates
prompt caching on its own. Marked ``e2e`` (``make e2e-proxy``): scripts/install_clients.sh
installs the pinned CLIs into ``${CTX_E2E_CACHE:-~/.cache/ctx-e2e}`` the first time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.clients import require, run_claude
from support.fake_api import FakeServer, OpenAIAPI, ScriptedAgent, cache_blocks, scripted_project

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def claude() -> str:
    return str(require("claude", install_missing=True))


def _pairs_intact(body: dict) -> bool:
    uses: list[str] = []
    for msg in body["messages"]:
        content = msg["content"] if isinstance(msg["content"], list) else []
        for part in content:
            if part.get("type") == "tool_use":
                uses.append(part["id"])
            if part.get("type") == "tool_result" and part["tool_use_id"] not in uses:
                return False
    results = {
        p["tool_use_id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "tool_result"
    }
    return set(uses) <= results


def test_claude_code_through_ctx_wrap(claude: str, tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    offload = project / ".ctx-offload"
    steps = scripted_project(project, turns=40)
    fake = ScriptedAgent(steps, offload_dir=str(offload))
    with fake.serve() as server:
        done = run_claude(
            claude, project, home, server.base_url,
            wrap=["--offload-dir", str(offload), "--clear-at-least", "5000"],
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False and result["result"] == "All files read. Done."
    # Every request was accepted, and no request split a tool pair.
    assert server.rejected() == []
    assert fake.totals.requests >= 42
    assert all(_pairs_intact(body) for body in fake.bodies)
    # The proxy really reduced: late requests carry cleared results, not the originals.
    last = json.dumps(fake.bodies[-1])
    assert "[ctx cleared: " in last or "ctx: old tool result cleared" in last
    # The agent read an offloaded file back and got the original text.
    assert "path" in fake.readback, fake.readback
    original = fake.originals[fake.readback["tool_use_id"]]
    assert fake.readback["text"].strip() == original.strip()
    # The proxy's figures equal what the server billed.
    stats = json.loads((offload / "ctx-proxy-stats.json").read_text())
    mine = stats["by_api"]["anthropic"]["with_proxy"]
    assert mine["cache_read"] == fake.totals.cache_read
    assert mine["cache_write"] == fake.totals.cache_write
    assert mine["uncached"] == fake.totals.input_tokens
    assert stats["upstream_usage"]["cache_read_input_tokens"] == fake.totals.cache_read
    # The history sent stays under 30,000 tokens (the default live preset clears every
    # result but the newest round's once that pays), give or take the newest round.
    budget = 30_000 + max(
        sum(b[1] for b in cache_blocks({"messages": [m]})) for m in fake.bodies[-1]["messages"]
    )
    for body in fake.bodies:
        history = sum(
            b[1] for b in cache_blocks({"system": body.get("system"), "messages": body["messages"]})
        )
        assert history <= budget
    # And the run is at least 30% cheaper than the same run without the proxy.
    assert stats["by_api"]["anthropic"]["billed_saved_pct"] >= 30
    assert "ctx wrap:" in done.stderr and "% saved" in done.stderr


def test_direct_run_costs_what_the_proxy_predicts(claude: str, tmp_path: Path) -> None:
    """Without ctx, the same run is billed what the proxy's 'without' figure said."""
    runs = {}
    for mode in ("direct", "wrapped"):
        project, home = tmp_path / mode / "project", tmp_path / mode / "home"
        project.mkdir(parents=True)
        home.mkdir()
        steps = scripted_project(project, turns=12)
        offload = project / ".ctx-offload"
        fake = ScriptedAgent(steps, offload_dir=str(offload))
        with fake.serve() as server:
            wrap = None if mode == "direct" else ["--offload-dir", str(offload)]
            done = run_claude(claude, project, home, server.base_url, wrap=wrap)
        assert done.returncode == 0, done.stderr[-2000:]
        assert server.rejected() == []
        runs[mode] = (fake, offload)
    direct, _ = runs["direct"]
    _, offload = runs["wrapped"]
    stats = json.loads((offload / "ctx-proxy-stats.json").read_text())
    # The wrapped run has one more request (reading an offloaded file back): compare the rest.
    same = stats["recent_requests"][: direct.totals.requests]
    assert len(same) == direct.totals.requests
    read = sum(r["without_proxy"]["cache_read"] for r in same)
    write = sum(r["without_proxy"]["cache_write"] for r in same)
    # The temp paths differ in length between the runs, so allow a small difference.
    assert read == pytest.approx(direct.totals.cache_read, rel=0.01)
    assert write == pytest.approx(direct.totals.cache_write, rel=0.01)


def test_codex_through_ctx_wrap(tmp_path: Path) -> None:
    """The real Codex CLI: its WebSocket attempt gets 426, it falls back to HTTP through ctx."""
    binary = require("codex", install_missing=True)
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX"))}
    with FakeServer(OpenAIAPI("Hello from the fake Responses API")) as fake:
        env.update(
            HOME=str(home),
            CODEX_HOME=str(home / ".codex"),
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=f"{fake.base_url}/v1",  # ctx wrap makes it the proxy's upstream
            CTX_CODEX_BIN=str(binary),
        )
        argv = [
            sys.executable,
            "-m",
            "ctxcli",
            "wrap",
            "codex",
            "--offload-dir",
            str(tmp_path / "off"),
        ]
        argv += ["--", "exec", "--skip-git-repo-check", "say hi"]
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Hello from the fake Responses API" in done.stdout
    turns = fake.posts("/v1/responses")
    assert turns and turns[0].body["stream"] is True and all(t.accepted for t in turns)
    # The proxy answered the WebSocket upgrades itself (426): none reached the API.
    assert [r for r in fake.requests if r.headers.get("upgrade")] == []
    assert "ctx wrap: 1 model requests" in done.stderr
    assert "openai_responses" in done.stderr
