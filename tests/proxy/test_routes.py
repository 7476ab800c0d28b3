"""Which upstream a request reaches: by configuration, never guessed from its headers.

Two loopback fake APIs stand in for Anthropic and OpenAI and record what reaches them
(credentials redacted, but seen). A credential must only ever reach the API the client
addressed: under ``ctx wrap`` the proxy has one upstream; ``ctx proxy`` routes the model
endpoints by their path, ``/anthropic/...`` and ``/openai/...`` by their prefix, and any
other path only where ``other_paths`` says.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer
from ctxcli.proxy.wrap import run_wrapped
from support.fake_api import FakeServer, MessagesAPI, OpenAIAPI

BEARER = {"authorization": "Bearer sk-ant-oat01-TEST"}
ANTHROPIC_BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
CHAT_BODY = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def upstreams() -> Iterator[tuple[FakeServer, FakeServer]]:
    with (
        FakeServer(MessagesAPI(), lifetime_s=120) as anthropic,
        FakeServer(OpenAIAPI(), lifetime_s=120) as openai,
    ):
        yield anthropic, openai


def proxy_for(tmp_path: Path, upstreams: tuple[FakeServer, FakeServer], **kw: Any) -> ProxyServer:
    anthropic, openai = upstreams
    settings = ProxySettings(
        upstream=anthropic.base_url,
        openai_upstream=openai.base_url,
        offload_dir=str(tmp_path / "off"),
        **kw,
    )
    return ProxyServer(ProxyCore(settings))


def seen(server: FakeServer) -> list[tuple[str, str, bool]]:
    return [(r.method, r.path, r.credential) for r in server.requests]


def test_other_paths_go_nowhere_unless_configured(
    tmp_path: Path, upstreams: tuple[FakeServer, FakeServer]
) -> None:
    anthropic, openai = upstreams
    with proxy_for(tmp_path, upstreams) as proxy:
        for method, path in (
            ("GET", "/v1/models"),
            ("GET", "/api/oauth/profile"),
            ("POST", "/v1/files"),
        ):
            answer = httpx.request(method, proxy.url + path, headers=BEARER, timeout=30)
            assert answer.status_code == 404
            assert f"{proxy.url}/anthropic" in answer.json()["error"]["message"]
    assert seen(anthropic) == [] and seen(openai) == []


def test_model_paths_and_prefixes_reach_their_own_api(
    tmp_path: Path, upstreams: tuple[FakeServer, FakeServer]
) -> None:
    anthropic, openai = upstreams
    with proxy_for(tmp_path, upstreams) as proxy, httpx.Client(headers=BEARER, timeout=30) as http:
        assert http.post(proxy.url + "/v1/messages", json=ANTHROPIC_BODY).status_code == 200
        assert http.post(proxy.url + "/v1/chat/completions", json=CHAT_BODY).status_code == 200
        assert http.get(proxy.url + "/anthropic/v1/models").status_code == 200
        assert (
            http.post(proxy.url + "/anthropic/v1/messages", json=ANTHROPIC_BODY).status_code == 200
        )
        assert http.get(proxy.url + "/openai/v1/models").status_code == 200
        stats = http.get(proxy.url + "/stats").json()
    assert seen(anthropic) == [
        ("POST", "/v1/messages", True),
        ("GET", "/v1/models", True),
        ("POST", "/v1/messages", True),
    ]
    assert seen(openai) == [("POST", "/v1/chat/completions", True), ("GET", "/v1/models", True)]
    # A prefixed model endpoint is still reduced and accounted for.
    assert stats["requests"] == 3 and set(stats["by_api"]) == {"anthropic", "openai_chat"}


def test_other_paths_go_where_configured(
    tmp_path: Path, upstreams: tuple[FakeServer, FakeServer]
) -> None:
    anthropic, openai = upstreams
    with proxy_for(tmp_path, upstreams, other_paths="anthropic") as proxy:
        assert httpx.get(proxy.url + "/v1/models", headers=BEARER).status_code == 200
    assert seen(anthropic) == [("GET", "/v1/models", True)] and seen(openai) == []


def test_one_upstream_takes_every_path(
    tmp_path: Path, upstreams: tuple[FakeServer, FakeServer]
) -> None:
    anthropic, openai = upstreams
    with proxy_for(tmp_path, upstreams, single_upstream="openai") as proxy:
        with httpx.Client(headers=BEARER, timeout=30) as http:
            http.get(proxy.url + "/v1/models")
            http.post(proxy.url + "/v1/messages", json=ANTHROPIC_BODY)
            http.get(proxy.url + "/anthropic/v1/models")
    assert seen(anthropic) == []
    assert [path for _, path, _ in seen(openai)] == [
        "/v1/models",
        "/v1/messages",
        "/anthropic/v1/models",
    ]


def test_an_unknown_api_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="other_paths 'gemini' is not an API"):
        ProxyCore(ProxySettings(offload_dir=str(tmp_path), other_paths="gemini"))  # type: ignore[arg-type]


CLIENT = """
import os, urllib.error, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
for path in ("/v1/models", "/api/oauth/profile"):
    req = urllib.request.Request(base + path, headers={"authorization": "Bearer sk-ant-oat01-TEST"})
    try:
        urllib.request.urlopen(req).read()
    except urllib.error.HTTPError as answer:  # the fake knows no OAuth profile: 404
        answer.close()
"""


def test_ctx_wrap_claude_sends_nothing_to_openai(
    tmp_path: Path, upstreams: tuple[FakeServer, FakeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    anthropic, openai = upstreams
    script = tmp_path / "claude"
    script.write_text(f"#!{sys.executable}\n{CLIENT}")
    script.chmod(0o755)
    monkeypatch.setenv("CTX_CLAUDE_BIN", str(script))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.base_url)
    settings = ProxySettings(openai_upstream=openai.base_url, offload_dir=str(tmp_path / "off"))
    result = run_wrapped("claude", [], settings)
    assert result.exit_code == 0
    assert seen(anthropic) == [("GET", "/v1/models", True), ("GET", "/api/oauth/profile", True)]
    assert seen(openai) == []
