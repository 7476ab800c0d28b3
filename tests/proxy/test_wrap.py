"""``ctx wrap`` and ``ctx proxy`` as processes: exit codes, and what a run leaves on disk.

The client is a small script standing in for Claude Code (it sends what the test tells it
through the proxy, then exits or kills itself); the upstream is the tests' fake Messages
API. Each run gets a private ``$XDG_CACHE_HOME``, so the test sees every ``run-*``
directory a run makes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxcli.proxy.engine import STATS_FILE, ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer
from support.fake_api import FakeServer, MessagesAPI

CLIENT = """
import json, os, signal, sys, urllib.request
url = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
body = json.loads(open(os.environ["FAKE_BODY"]).read())
req = urllib.request.Request(url, json.dumps(body).encode(),
                             {"content-type": "application/json", "x-api-key": "sk-test"})
urllib.request.urlopen(req).read()
if os.environ.get("FAKE_KILL"):
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def small_body() -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def big_body(rounds: int = 14) -> dict[str, Any]:
    """A conversation of 14 large tool rounds: the default preset clears the old results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for i in range(rounds):
        text = "\n".join(f"def f_{i}_{n}(x): return x * {n}  # line {n}" for n in range(300))
        use = {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "Read",
            "input": {"file_path": f"/p/{i}"},
        }
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": text}
        messages.append({"role": "user", "content": [result]})
    return {"model": "m", "max_tokens": 5, "messages": messages}


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """ctx's cache directory through $XDG_CACHE_HOME (the platform's convention)."""
    monkeypatch.delenv("CTX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "ctx"


def run_dirs(cache: Path) -> list[Path]:
    return sorted((cache / "proxy").glob("run-*")) if (cache / "proxy").is_dir() else []


def wrap(tmp_path: Path, body: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    """``ctx wrap claude`` with the stand-in client, against a fake Messages API."""
    script = tmp_path / "client"
    script.write_text(f"#!{sys.executable}\n{CLIENT}")
    script.chmod(0o755)
    sent = tmp_path / "body.json"
    sent.write_text(json.dumps(body))
    with FakeServer(MessagesAPI(), lifetime_s=120) as api:
        extra = {"ANTHROPIC_BASE_URL": api.base_url, "CTX_CLAUDE_BIN": str(script)}
        return subprocess.run(
            [sys.executable, "-m", "ctxcli", "wrap", "claude"],
            env={**os.environ, **extra, "FAKE_BODY": str(sent), **env},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def test_a_client_killed_by_a_signal_makes_ctx_exit_128_plus_it(
    tmp_path: Path, cache: Path
) -> None:
    done = wrap(tmp_path, small_body(), FAKE_KILL="1")
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert wrap(tmp_path, small_body(), FAKE_EXIT="3").returncode == 3


def test_a_run_that_offloaded_nothing_leaves_no_directory(tmp_path: Path, cache: Path) -> None:
    done = wrap(tmp_path, small_body())
    assert done.returncode == 0, done.stderr
    assert run_dirs(cache) == []
    assert "nothing was offloaded" in done.stderr


def test_a_run_that_offloaded_keeps_its_directory_and_says_where(
    tmp_path: Path, cache: Path
) -> None:
    done = wrap(tmp_path, big_body())
    assert done.returncode == 0, done.stderr
    (kept,) = run_dirs(cache)
    assert any(p.is_file() for p in kept.glob("clear/*"))
    assert f"offloaded originals kept in {kept}" in done.stderr


def test_a_failed_run_leaves_no_directory(tmp_path: Path, cache: Path) -> None:
    missing = tmp_path / "no-such-client"
    done = subprocess.run(
        [sys.executable, "-m", "ctxcli", "wrap", "claude"],
        env={**os.environ, "CTX_CLAUDE_BIN": str(missing)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and str(missing) in done.stderr
    assert run_dirs(cache) == []


def test_port_in_use_is_one_line_and_leaves_nothing(tmp_path: Path, cache: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "ctxcli", "proxy", "--port", str(port)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"ctx: error: cannot listen on 127.0.0.1:{port} (Address already in use); "
        "choose another port or stop what listens there"
    ]
    assert run_dirs(cache) == []


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.may_skip(reason="a platform property")
@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_what_the_proxy_writes_is_private(tmp_path: Path, cache: Path) -> None:
    old = os.umask(0o022)
    try:
        default = ProxyCore(ProxySettings())
        named = tmp_path / "named" / "off"
        with FakeServer(MessagesAPI(), lifetime_s=120) as api:
            core = ProxyCore(ProxySettings(upstream=api.base_url, offload_dir=str(named)))
            with ProxyServer(core) as proxy:
                answer = httpx.post(f"{proxy.url}/v1/messages", json=big_body(), timeout=60)
                assert answer.status_code == 200
    finally:
        os.umask(old)
    # The run directory comes from ctx's cache directory ($XDG_CACHE_HOME here).
    assert Path(default.offload_dir).parent == cache / "proxy"
    for folder in (cache, cache / "proxy", Path(default.offload_dir), named, named / "clear"):
        assert _mode(folder) == 0o700, folder
    files = [named / STATS_FILE, *named.glob("clear/*")]
    assert len(files) > 1 and all(_mode(f) == 0o600 for f in files), files
    default.finish()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctx_proxy_stopped_ends_its_run(cache: Path, stop: signal.Signals) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxcli", "proxy", "--port", str(port)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert "listening on" in proc.stderr.readline()  # bound and serving
        (run,) = run_dirs(cache)
        assert httpx.get(f"http://127.0.0.1:{port}/stats", timeout=30).json()["offload_dir"] == str(
            run
        )
    finally:
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err.splitlines()[-1] == "ctx proxy: nothing was offloaded; the run directory was removed"
    assert run_dirs(cache) == []
