"""A request ctx cannot read is forwarded as it came, with one warning (issue 41 item 13).

Through the real proxy (uvicorn, httpx) in front of the loopback fake Messages API: the
proxy must never answer in its own words (a plain-text 500) for a body it cannot read; the
upstream decides, and gets the client's bytes unchanged. Nested ~1,000 levels deep the
parser gives up (RecursionError); past 254 levels in the first message the JSON encoder did;
a lone surrogate or an integer past 64 bits stops the encoder as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer
from support.fake_api import FakeServer, MessagesAPI

HEADERS = {
    "x-api-key": "sk-test",
    "anthropic-version": "2023-06-01",
    "content-type": "application/json",
}


DEEP = "@deep@"


def body(depth: int, where: str) -> bytes:
    """A Messages body with ``depth`` nested arrays in its first or its last message."""
    first: Any = "Hello."
    last: Any = "More."
    deep = [{"type": "text", "text": "Here.", "x": DEEP}]
    if where == "first":
        first = deep
    else:
        last = deep
    messages = [
        {"role": "user", "content": first},
        {"role": "assistant", "content": "Yes?"},
        {"role": "user", "content": last},
    ]
    text = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": messages})
    return text.replace(json.dumps(DEEP), "[" * depth + "]" * depth).encode()


class Proxy:
    def __init__(self, upstream: FakeServer, server: ProxyServer, warnings: list[str]) -> None:
        self.upstream, self.server, self.warnings = upstream, server, warnings


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    warnings: list[str] = []
    offload = tmp_path_factory.mktemp("nesting") / "offload"
    with FakeServer(MessagesAPI(), lifetime_s=300) as upstream:
        settings = ProxySettings(upstream=upstream.base_url, offload_dir=str(offload))
        with ProxyServer(ProxyCore(settings, warn=warnings.append)) as server:
            yield Proxy(upstream, server, warnings)


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("depth", [300, 1_000, 1_500, 20_000])
def test_a_deeply_nested_request_goes_out_unchanged(proxy: Proxy, depth: int, where: str) -> None:
    raw = body(depth, where)
    proxy.warnings.clear()
    seen = len(proxy.upstream.requests)
    reply = httpx.post(f"{proxy.server.url}/v1/messages", content=raw, headers=HEADERS, timeout=60)
    # The upstream answered (200, or its own 400 for JSON it cannot parse), not the proxy.
    assert reply.headers["content-type"].startswith("application/json"), reply.text[:200]
    assert reply.status_code in (200, 400)
    got = proxy.upstream.requests[seen:]
    assert len(got) == 1 and got[0].size == len(raw)
    assert got[0].body == _parsed(raw)
    assert len(proxy.warnings) == 1, proxy.warnings
    assert proxy.warnings[0].startswith("forwarding a request unchanged: ")
    assert "nest" in proxy.warnings[0]


ODD = {
    "lone surrogate": b'{"role": "user", "content": "a \\ud800 b"}',
    "integer past 64 bits": b'{"role": "user", "content": [{"type": "text", "text": "a", '
    b'"n": 123456789012345678901234567890}]}',
}


@pytest.mark.parametrize("first", ODD.values(), ids=list(ODD))
def test_a_request_the_encoder_refuses_goes_out_unchanged(proxy: Proxy, first: bytes) -> None:
    raw = b'{"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [' + first + b"]}"
    proxy.warnings.clear()
    seen = len(proxy.upstream.requests)
    reply = httpx.post(f"{proxy.server.url}/v1/messages", content=raw, headers=HEADERS, timeout=60)
    assert reply.status_code == 200, reply.text[:200]
    got = proxy.upstream.requests[seen:]
    assert len(got) == 1 and got[0].size == len(raw) and got[0].body == json.loads(raw)
    assert len(proxy.warnings) == 1, proxy.warnings
    assert proxy.warnings[0].startswith("forwarding a request unchanged: ctx cannot read it")


def _parsed(raw: bytes) -> Any:
    """The body as the fake API keeps it: parsed, or its text when json cannot parse it."""
    try:
        return json.loads(raw)
    except RecursionError:
        return raw.decode()


def test_a_request_of_ordinary_depth_is_read_and_priced(proxy: Proxy) -> None:
    proxy.warnings.clear()
    raw = body(20, "last")
    reply = httpx.post(f"{proxy.server.url}/v1/messages", content=raw, headers=HEADERS, timeout=60)
    assert reply.status_code == 200
    assert proxy.warnings == []
    last = httpx.get(f"{proxy.server.url}/stats").json()["recent_requests"][-1]
    assert last["tokens_in"] > 0
