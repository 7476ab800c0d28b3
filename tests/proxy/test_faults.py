"""An upstream that fails: the client hears it in its API's words, the terminal gets one line.

Under ``ctx wrap claude`` the proxy's stderr is the terminal Claude Code draws on, so a
failure upstream must cost at most one warning line there, never a traceback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer
from support.fake_api import FakeServer, MessagesAPI, Reply, sse

BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/stats", timeout=5)
            return
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)


def test_an_upstream_reset_mid_stream_is_one_warning_line(tmp_path: Path) -> None:
    events = sse([("message_start", {"type": "message_start"}), ("ping", {"type": "ping"})])
    chunks = [*events, b"event: never\ndata: {}\n\n"]
    port = _free_port()
    with FakeServer(MessagesAPI(), lifetime_s=120) as api:
        api.push(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks, reset_after=2))
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxcli", "proxy", "--port", str(port),
             "--upstream", api.base_url, "--offload-dir", str(tmp_path / "off")],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_for(url, proc)
            got = b""
            with pytest.raises(httpx.RemoteProtocolError):  # broken off, not a clean end
                with httpx.stream(
                    "POST", f"{url}/v1/messages", json={**BODY, "stream": True}
                ) as answer:
                    assert answer.status_code == 200
                    for block in answer.iter_raw():
                        got += block
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
    assert got == b"".join(events)  # the client still gets what came
    lines = err.splitlines()
    assert "Traceback" not in err, err
    warnings = [line for line in lines if line.startswith("ctx: warning:")]
    assert len(warnings) == 1, err
    assert f"upstream {api.base_url}/v1/messages broke off its answer after" in warnings[0]
    assert len(lines) == 3, err  # listening, the warning, where the offloaded text is


def test_an_upstream_that_is_down_is_answered_in_the_apis_own_error_shape(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{_free_port()}"
    warnings: list[str] = []
    settings = ProxySettings(upstream=down, openai_upstream=down, offload_dir=str(tmp_path))
    with ProxyServer(ProxyCore(settings, warn=warnings.append)) as proxy:
        chat = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}
        openai = httpx.post(f"{proxy.url}/v1/chat/completions", json=chat, timeout=30)
        anthropic = httpx.post(f"{proxy.url}/v1/messages", json=BODY, timeout=30)
    assert openai.status_code == 502 and set(openai.json()) == {"error"}
    assert set(openai.json()["error"]) == {"message", "type", "param", "code"}
    assert anthropic.status_code == 502 and anthropic.json()["type"] == "error"
    assert set(anthropic.json()["error"]) == {"type", "message"}
    assert len(warnings) == 2
