"""ctx proxy: per-conversation reduction that keeps the provider's cache, and its HTTP side.

The core is driven with request bodies shaped like Claude Code's (a cached system prompt,
a breakpoint on the last message, tool rounds on large files) through the real reducer;
the HTTP tests put the real proxy (uvicorn, httpx) in front of a loopback fake API.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxcli.core.errors import CtxError
from ctxcli.proxy.conversations import ConversationStore
from ctxcli.proxy.engine import STATS_FILE, ProxyCore, ProxySettings
from ctxcli.proxy.mcp_server import build_server, read_stats, retrieve
from ctxcli.proxy.rules import rejection
from ctxcli.proxy.server import ProxyServer
from ctxcli.proxy.shapes import (
    breakpoint_positions,
    place_breakpoints,
    strip_cache_control,
)
from support.fake_api import FakeServer, MessagesAPI, OpenAIAPI, ScriptedAgent, Step

CC = {"type": "ephemeral"}
MODEL = "claude-sonnet-4-5-20250929"
SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 100, "cache_control": CC}]


def file_text(i: int, lines: int = 300) -> str:
    return "\n".join(f"{n:6}\tdef f_{i}_{n}(x): return x * {n}  # line {n}" for n in range(lines))


class Agent:
    """Builds successive Claude-Code-shaped request bodies of one growing conversation."""

    def __init__(self, lines: int = 300, tools: list[dict[str, Any]] | None = None) -> None:
        self.messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": "Read every file."}]}
        ]
        self.lines = lines
        self.turn = 0
        self.tools = tools

    def body(self) -> dict[str, Any]:
        messages = copy.deepcopy(self.messages)
        messages[-1]["content"][-1]["cache_control"] = CC
        body = {"model": MODEL, "max_tokens": 64, "system": SYSTEM, "messages": messages}
        return {**body, "tools": self.tools} if self.tools else body

    def step(self) -> None:
        i = self.turn
        use = {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "Read",
            "input": {"file_path": f"/p/f{i}.py"},
        }
        self.messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"file {i}"}, use]}
        )
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{i}",
            "content": file_text(i, self.lines),
        }
        self.messages.append({"role": "user", "content": [result]})
        self.turn += 1


def core_for(tmp_path: Path, **kw: Any) -> tuple[ProxyCore, list[str], list[str]]:
    lines: list[str] = []
    warnings: list[str] = []
    settings = ProxySettings(offload_dir=str(tmp_path / "offload"), **kw)
    return ProxyCore(settings, log=lines.append, warn=warnings.append), lines, warnings


def run_agent(core: ProxyCore, turns: int) -> list[dict[str, Any]]:
    agent = Agent()
    sent = []
    for _ in range(turns):
        body = agent.body()
        out = json.loads(core.prepare("anthropic", json.dumps(body).encode()).body)
        assert rejection("anthropic", out) is None, rejection("anthropic", out)
        sent.append(out)
        agent.step()
    return sent


def test_sent_messages_keep_their_bytes_until_a_cut_worth_making(tmp_path: Path) -> None:
    core, lines, _ = core_for(tmp_path, clear_at_least=5000)
    sent = run_agent(core, 20)
    cuts = [r.number for r in core.records if r.accepted_cut]
    assert cuts, "the run never went over the preset's budget"
    for prev, cur, record in zip(sent, sent[1:], core.records[1:], strict=False):
        if record.accepted_cut:
            continue
        # Between cuts every request starts with the previous one's messages, byte for byte.
        before = [json.dumps(m, sort_keys=True) for m in _plain(prev["messages"])]
        after = [json.dumps(m, sort_keys=True) for m in _plain(cur["messages"])]
        assert after[: len(before)] == before
    # The tokens sent stay bounded while the input grows.
    assert core.records[-1].tokens_in > 3 * core.records[-1].tokens_sent
    assert len(lines) == 20 and "tokens in" in lines[-1] and "without ctx" in lines[-1]
    stats = core.stats()
    assert stats["by_api"]["anthropic"]["billed_saved_pct"] > 30


def _plain(messages: list[Any]) -> list[Any]:

    return strip_cache_control(messages)


def test_a_cut_under_the_floor_is_held_back_and_the_cached_prefix_kept(tmp_path: Path) -> None:
    eager, _, _ = core_for(tmp_path / "a", clear_at_least=0)
    patient, _, _ = core_for(tmp_path / "b", clear_at_least=10**9)
    run_agent(eager, 20)
    sent = run_agent(patient, 20)
    assert sum(r.accepted_cut for r in eager.records) > 0
    assert sum(r.accepted_cut for r in patient.records) == 0
    assert sum(r.held_back for r in patient.records) > 0
    # Never accepting a cut means sending the original history, reduced only at its tail.
    assert all(r.with_proxy.cache_read >= r.without_proxy.cache_read for r in patient.records)
    assert len(sent[-1]["messages"]) == 39


def test_breakpoints_stay_valid_and_at_most_four(tmp_path: Path) -> None:
    original = [
        {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": CC}]},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": ""}],
        },
        {"role": "user", "content": [{"type": "text", "text": "b", "cache_control": CC}]},
    ]
    reduced = [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": ""}],
        },
        {"role": "user", "content": "b"},
    ]
    out, placed = place_breakpoints(original, reduced, {"system": SYSTEM})
    assert placed == 2
    assert breakpoint_positions(out) == [(3, 0), (1, 0)]
    # Three fixed breakpoints leave room for one: the most recent message's.
    body = {"system": SYSTEM * 3}
    out, placed = place_breakpoints(original[::-1][:1] * 2, reduced[-1:] * 2, body)
    assert placed == 1
    # A breakpoint on a thinking block or an empty text moves to a block that can hold it.
    bp = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "thinking", "thinking": "t", "cache_control": CC},
            ],
        }
    ]
    out, _ = place_breakpoints(bp, _plain(bp), {})
    assert out[0]["content"][0]["cache_control"] == CC
    assert "cache_control" not in out[0]["content"][1]


def test_unparseable_and_historyless_requests_pass_through(tmp_path: Path) -> None:
    core, _, warnings = core_for(tmp_path)
    assert core.prepare("anthropic", b"not json{").body == b"not json{"
    assert warnings and "not JSON" in warnings[0]
    raw = json.dumps({"model": "m", "messages": "hi"}).encode()
    assert core.prepare("anthropic", raw).body == raw
    # A shape the reducer rejects is forwarded unchanged too, with a warning.
    bad = json.dumps({"model": "m", "messages": [{"role": "user", "content": 5}]}).encode()
    assert core.prepare("anthropic", bad).body == bad
    assert core.stats()["passthrough"] >= 1


def test_conversations_are_bounded_and_expire() -> None:
    now = [0.0]
    made: list[str] = []

    def make(api: str) -> Any:
        made.append(api)
        return object()

    store = ConversationStore(make, max_conversations=2, idle_seconds=10, clock=lambda: now[0])
    store.get("a", "anthropic")
    store.get("b", "anthropic")
    store.get("c", "anthropic")
    assert store.keys() == ["b", "c"]
    now[0] = 5
    store.get("c", "anthropic")
    now[0] = 12
    store.get("d", "anthropic")
    assert store.keys() == ["c", "d"] and store.expired == 2


# -- HTTP -------------------------------------------------------------------------------


@pytest.fixture
def agent() -> Iterator[tuple[FakeServer, ScriptedAgent]]:
    """A fake Messages API whose model plays one Read call, billing like prompt caching."""
    model = ScriptedAgent([Step("Read", {"file_path": "/p/a.py"})])
    with model.serve(lifetime_s=300) as server:
        yield server, model


def test_http_streaming_and_json_pass_through(
    tmp_path: Path, agent: tuple[FakeServer, ScriptedAgent]
) -> None:
    upstream, model = agent
    core, _, _ = core_for(tmp_path, upstream=upstream.base_url)
    agent = Agent()
    with ProxyServer(core) as server:
        body = {
            **agent.body(),
            "system": SYSTEM * 2,  # over the 1,024 tokens the API caches at least
            "tools": [{"name": "Read", "input_schema": {}}],
            "metadata": {"user_id": "u"},
            "x_unknown": 1,
        }
        headers = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01", "x-extra": "kept"}
        streamed = httpx.post(
            f"{server.url}/v1/messages?beta=true",
            json={**body, "stream": True},
            headers=headers,
            timeout=30,
        )
        assert streamed.status_code == 200
        assert streamed.headers["content-type"].startswith("text/event-stream")
        assert "event: message_start" in streamed.text and '"tool_use"' in streamed.text
        plain = httpx.post(f"{server.url}/v1/messages", json=body, headers=headers, timeout=30)
        assert plain.json()["content"][-1]["name"] == "Read"
        # Unknown fields and headers reach the upstream; the proxy reads the usage it reported.
        assert model.bodies[-1]["x_unknown"] == 1
        assert model.bodies[-1]["metadata"] == {"user_id": "u"}
        assert upstream.requests[-1].headers["x-extra"] == "kept"
        stats = httpx.get(f"{server.url}/stats").json()
        assert stats["requests"] == 2
        assert stats["upstream_usage"]["cache_read_input_tokens"] == model.totals.cache_read
        assert stats["by_api"]["anthropic"]["with_proxy"]["cache_write"] == model.totals.cache_write
        # An upstream error comes back as it was.
        bad = httpx.post(
            f"{server.url}/v1/messages",
            json={
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "assistant", "content": "x"}],
            },
            headers=headers,
        )
        assert bad.status_code == 400 and "first message" in bad.text


def test_websocket_upgrade_is_refused_with_426(tmp_path: Path) -> None:
    import websockets.sync.client as ws
    from websockets.exceptions import InvalidStatus

    core, _, _ = core_for(tmp_path)
    with ProxyServer(core) as server, pytest.raises(InvalidStatus) as caught:
        ws.connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=10)
    assert caught.value.response.status_code == 426


def test_openai_chat_is_reduced_too(tmp_path: Path) -> None:
    core, _, _ = core_for(tmp_path, clear_at_least=0)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
    ]
    for i in range(12):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": file_text(i)})
        out = json.loads(
            core.prepare(
                "openai_chat", json.dumps({"model": "gpt", "messages": messages}).encode()
            ).body
        )
    assert "cleared" in json.dumps(out["messages"][3])
    assert (
        core.stats()["by_api"]["openai_chat"]["with_proxy"]["input_tokens"]
        < core.stats()["tokens_in"]
    )


# -- wrap and mcp ---------------------------------------------------------------------------

FAKE_CLIENT = """
import os, sys, json, urllib.request
url = os.environ.get("ANTHROPIC_BASE_URL") or sys.argv[sys.argv.index("-c") + 1].split("=", 1)[1].strip('"')
print(json.dumps({"argv": sys.argv[1:], "url": url}))
body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
path = "/v1/messages" if "ANTHROPIC_BASE_URL" in os.environ else "/v1/chat/completions"
req = urllib.request.Request(url.rstrip("/").removesuffix("/v1") + path, json.dumps(body).encode(),
                             {"content-type": "application/json", "x-api-key": "sk-test"})
print(urllib.request.urlopen(req).read().decode())
sys.exit(3)
"""


def _fake_client(tmp_path: Path) -> Path:
    script = tmp_path / "fakeclient"
    script.write_text(f"#!{sys.executable}\n{FAKE_CLIENT}")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_ctx_wrap_runs_the_client_through_a_proxy(
    tmp_path: Path, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"CTX_{client.upper()}_BIN", str(_fake_client(tmp_path)))
    env_var = "ANTHROPIC_BASE_URL" if client == "claude" else "OPENAI_BASE_URL"
    upstream = FakeServer(MessagesAPI() if client == "claude" else OpenAIAPI(), lifetime_s=300)
    monkeypatch.setenv(env_var, upstream.base_url)
    offload = tmp_path / "off"
    home_files = set(Path.home().glob("*")) if Path.home().exists() else set()
    done = subprocess.run(
        [sys.executable, "-m", "ctxcli", "wrap", client, "--offload-dir", str(offload), "--", "-p", "hello"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    first = json.loads(done.stdout.splitlines()[0])
    assert (
        first["url"].startswith("http://127.0.0.1:") and str(upstream.base_url) not in first["url"]
    )
    assert first["argv"][-2:] == ["-p", "hello"]
    if client == "claude":
        assert first["argv"][:2] == ["--add-dir", str(offload)]
    assert "ctx wrap: 1 model requests" in done.stderr, done.stderr
    # The user's base URL became the proxy's upstream.
    assert [r.accepted for r in upstream.requests] == [True]
    upstream.close()
    assert set(Path.home().glob("*")) == home_files


def test_ctx_wrap_unknown_client_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxcli", "wrap", "vim"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "choose one of claude, codex" in done.stderr


def test_mcp_retrieve_and_stats(tmp_path: Path) -> None:
    (tmp_path / "clear").mkdir()
    (tmp_path / "clear" / "t1").write_text("line 0\nline 1\nline 2\n")
    (tmp_path / STATS_FILE).write_text(json.dumps({"requests": 7}))
    assert retrieve(tmp_path, str(tmp_path / "clear" / "t1")) == "line 0\nline 1\nline 2\n"
    assert retrieve(tmp_path, "clear/t1", offset=1, limit=1) == (
        "line 1\n[ctx: lines 1-1 shown; read on with offset=2]"
    )
    with pytest.raises(CtxError, match="not inside the offload directory"):
        retrieve(tmp_path, "/etc/passwd")
    assert read_stats(tmp_path) == {"requests": 7}

    async def call() -> tuple[str, str, list[str]]:
        from mcp import Client

        async with Client(build_server(tmp_path)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            got = await client.call_tool("ctx_retrieve", {"path": "clear/t1", "offset": 2})
            stats = await client.call_tool("ctx_stats", {})
            return got.content[0].text, stats.content[0].text, names

    text, stats, names = asyncio.run(call())
    assert sorted(names) == ["ctx_retrieve", "ctx_stats"]
    assert text == "line 2\n" and json.loads(stats) == {"requests": 7}


def test_ctx_mcp_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("original text")

    async def call() -> str:
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ctxcli", "mcp", "--offload-dir", str(tmp_path)]
        )
        async with Client(params) as client:
            got = await client.call_tool("ctx_retrieve", {"path": "a.txt"})
            return got.content[0].text

    assert asyncio.run(call()) == "original text"


class _Rewrites:
    """A reducer that changes nothing but the messages (``rewrite``), as its own result."""

    offloaded: list[str] = []
    reused = 0
    changed_prefix_at = None
    held_back = False
    cache_breakpoint = None

    def rewrite(self, messages: list[Any]) -> list[Any]:
        raise NotImplementedError

    def reduce(self, messages: Any, *, system: Any = None, at: float | None = None) -> Any:
        self.messages = self.rewrite(list(messages))
        return self


class _Breaks(_Rewrites):
    """A reducer whose output the API would reject (its first message is the assistant's)."""

    def rewrite(self, messages: list[Any]) -> list[Any]:
        return messages[1:] or messages


def test_a_reduction_the_api_would_reject_is_not_sent(tmp_path: Path) -> None:
    warnings: list[str] = []
    settings = ProxySettings(offload_dir=str(tmp_path))
    core = ProxyCore(settings, warn=warnings.append, make_reducer=lambda api: _Breaks())
    agent = Agent()
    agent.step()
    raw = json.dumps(agent.body()).encode()
    assert core.prepare("anthropic", raw).body == raw
    assert 'would be rejected (messages: first message must use the "user" role)' in warnings[0]


def test_ctx_proxy_command_serves_stats(tmp_path: Path) -> None:
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxcli", "proxy", "--port", str(port), "--offload-dir", str(tmp_path), "-v"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                stats = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert stats["requests"] == 0 and stats["offload_dir"] == str(tmp_path)
        assert stats["preset"] == "live"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"ctx proxy: listening on http://127.0.0.1:{port}" in err


def test_openai_responses_input_is_reduced(tmp_path: Path) -> None:
    core, _, _ = core_for(tmp_path, clear_at_least=0)
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(12):
        items.append(
            {"type": "function_call", "call_id": f"c{i}", "name": "read", "arguments": "{}"}
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": file_text(i)})
        body = {"model": "gpt", "instructions": "be brief", "input": items}
        out = json.loads(core.prepare("openai_responses", json.dumps(body).encode()).body)
    assert "cleared" in json.dumps(out["input"][2])
    assert out["instructions"] == "be brief"
    # A request that continues a stored response is forwarded as it is.
    chained = json.dumps(
        {"model": "gpt", "previous_response_id": "r1", "input": items[-2:]}
    ).encode()
    assert core.prepare("openai_responses", chained).body == chained


class _DropsToolAnswers(_Rewrites):
    """A reducer whose output Chat Completions would reject: calls left without answers."""

    def rewrite(self, messages: list[Any]) -> list[Any]:
        return [m for m in messages if m.get("role") != "tool"]


def test_a_chat_reduction_the_api_would_reject_is_not_sent(tmp_path: Path) -> None:
    warnings: list[str] = []
    settings = ProxySettings(offload_dir=str(tmp_path))
    core = ProxyCore(settings, warn=warnings.append, make_reducer=lambda api: _DropsToolAnswers())
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    raw = json.dumps({"model": "gpt", "messages": history}).encode()
    assert core.prepare("openai_chat", raw).body == raw
    assert "did not have response messages: c1" in warnings[0]
