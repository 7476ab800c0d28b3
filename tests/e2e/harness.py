"""Drive the real Claude Code and Codex CLIs against the loopback fake APIs.

Used by the e2e tests and by ``make bench`` (benchmarks/resume_requests.py). The CLIs
come from ``scripts/install_clients.sh`` (pinned npm packages in a cache directory);
``support.clients.client`` says where one is, or why it is missing. The fake APIs are
``support.fake_api``'s.

A resume runs in a fresh HOME laid out the way the client expects:
``~/.claude/projects/<slug of the cwd>/<session id>.jsonl`` for Claude Code and
``~/.codex/sessions/YYYY/MM/DD/rollout-<stamp>-<id>.jsonl`` for Codex. No real key is
ever used: the clients get ``sk-ant-test`` / ``sk-test`` and talk to 127.0.0.1 only.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.clients import client, require
from support.fake_api import FakeServer, MessagesAPI, OpenAIAPI, Request
from support.paths import SHARED, need_shared

REPO = Path(__file__).resolve().parents[2]
PROMPT = "Reply with one word. (ctx-e2e resume probe)"
MARKER = "ctx-e2e resume probe"
RUN_TIMEOUT_S = 240

__all__ = ["client", "require"]


def shared(prefix: str) -> list[Path]:
    """The real sessions in ../shared/transcripts whose name starts with ``prefix``."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.glob(f"{prefix}*.jsonl") if p.is_file())


def require_shared() -> None:
    """Skip the calling test without the real transcripts (fail under CTX_REQUIRE_SHARED=1)."""
    need_shared()


def session_id_of(path: Path) -> str:
    """The session id a client resumes ``path`` by."""
    with path.open("rb") as fh:
        for raw in fh:
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict):
                payload = data.get("payload")
                if data.get("type") == "session_meta" and isinstance(payload, dict):
                    return str(payload["id"])
                if isinstance(data.get("sessionId"), str):
                    return str(data["sessionId"])
    raise ValueError(f"{path}: no session id found")


def claude_slug(cwd: Path) -> str:
    """Claude Code's project directory name for ``cwd``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def lay_out_claude(home: Path, cwd: Path, session: Path, sid: str) -> Path:
    """Put ``session`` where ``claude --resume sid`` run in ``cwd`` finds it."""
    target = home / ".claude" / "projects" / claude_slug(cwd) / f"{sid}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(session, target)
    return target


def lay_out_codex(home: Path, session: Path, sid: str) -> Path:
    """Put ``session`` where ``codex exec resume sid`` finds it."""
    with session.open("rb") as fh:
        first = json.loads(fh.readline())
    stamp = str(first["payload"].get("timestamp") or first.get("timestamp"))
    day = home / ".codex" / "sessions" / stamp[:4] / stamp[5:7] / stamp[8:10]
    day.mkdir(parents=True, exist_ok=True)
    target = day / f"rollout-{stamp[:19].replace(':', '-')}-{sid}.jsonl"
    shutil.copyfile(session, target)
    return target


@dataclass
class Resume:
    """What one resume did: the client's exit, what it printed, what the server saw."""

    returncode: int
    stdout: str
    stderr: str
    requests: list[Request]

    def turns(self, path: str) -> list[Request]:
        """The requests to ``path`` that carry the probe prompt (the resumed turn)."""
        return [r for r in self.requests if r.path == path and MARKER in json.dumps(r.body)]

    def accepted_turn(self, path: str, label: str) -> Request:
        """The resumed turn, after checking the client exited 0 and the server accepted it."""
        turns = self.turns(path)
        assert self.returncode == 0, f"{label}: the client failed\n{self.describe()}"
        assert turns, f"{label}: the client sent no resumed turn\n{self.describe()}"
        assert all(t.accepted for t in turns), f"{label}: rejected\n{self.describe()}"
        return max(turns, key=lambda t: t.size)

    def describe(self) -> str:
        seen = [f"{r.method} {r.path} -> {r.status} {r.error or ''}" for r in self.requests]
        return (
            f"exit {self.returncode}\nstdout: {self.stdout[-800:]}\nstderr: {self.stderr[-1500:]}"
            f"\nrequests: {seen}"
        )


def _base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
    }


def _run(cmd: list[str], cwd: Path, env: dict[str, str], api: FakeServer) -> Resume:
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    return Resume(proc.returncode, proc.stdout, proc.stderr, list(api.requests))


def _claude_env(home: Path, api: FakeServer) -> dict[str, str]:
    return {
        **_base_env(home),
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def resume_claude(work: Path, session: Path, sid: str | None = None) -> Resume:
    """``claude -p PROMPT --resume ID`` on a copy of ``session`` in a fresh HOME under ``work``."""
    exe, why = client("claude")
    if exe is None:
        raise RuntimeError(why)
    sid = sid or session_id_of(session)
    home, cwd = work / "home", work / "project"
    for d in (home / "tmp", cwd):
        d.mkdir(parents=True, exist_ok=True)
    lay_out_claude(home, cwd, session, sid)
    with FakeServer(MessagesAPI()) as api:
        return _run([str(exe), "-p", PROMPT, "--resume", sid], cwd, _claude_env(home, api), api)


_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-B]|\x1b[=>]")


def claude_picker(work: Path, sessions: list[Path], until: list[str]) -> str:
    """What ``claude --resume`` (the session picker) shows in a terminal, as plain text.

    The sessions are laid out for the project ``work/project`` (each file named by its
    session id), the first-run dialogs are marked done, and the picker runs in a 200x50
    pseudo-terminal until every string of ``until`` is on screen or RUN_TIMEOUT_S/4
    passes; then it is killed (by its pid) and the screen text returned.
    """
    exe, why = client("claude")
    if exe is None:
        raise RuntimeError(why)
    home, cwd = work / "home", work / "project"
    for d in (home / "tmp", cwd):
        d.mkdir(parents=True, exist_ok=True)
    for session in sessions:
        lay_out_claude(home, cwd, session, session.stem)
    settled = {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}
    config = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": ["sk-ant-test"], "rejected": []},
        "projects": {str(cwd): settled},
    }
    (home / ".claude.json").write_text(json.dumps(config))
    with FakeServer(MessagesAPI()) as api:
        env = {**_claude_env(home, api), "TERM": "xterm-256color"}
        pid, fd = pty.fork()
        if pid == 0:  # the child: the picker, in the project
            os.chdir(cwd)
            os.execve(str(exe), [str(exe), "--resume"], env)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        screen, text = b"", ""
        deadline = time.monotonic() + RUN_TIMEOUT_S / 4
        try:
            while time.monotonic() < deadline and not all(u in text for u in until):
                if select.select([fd], [], [], 0.5)[0]:
                    try:
                        screen += os.read(fd, 1 << 16)
                    except OSError:
                        break
                    text = _ANSI.sub(b"", screen).decode("utf-8", "replace")
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
    return text


def resume_codex(work: Path, session: Path) -> Resume:
    """``codex exec resume ID PROMPT`` on a copy of ``session`` in a fresh HOME under ``work``."""
    exe, why = client("codex")
    if exe is None:
        raise RuntimeError(why)
    sid = session_id_of(session)
    home, cwd = work / "home", work / "project"
    for d in (home / "tmp", cwd):
        d.mkdir(parents=True, exist_ok=True)
    lay_out_codex(home, session, sid)
    with FakeServer(OpenAIAPI()) as api:
        env = {
            **_base_env(home),
            "CODEX_HOME": str(home / ".codex"),
            "OPENAI_API_KEY": "sk-test",
        }
        cmd = [
            str(exe),
            "exec",
            "--skip-git-repo-check",
            "-c",
            f'openai_base_url="{api.base_url}/v1"',
            "resume",
            sid,
            PROMPT,
        ]
        return _run(cmd, cwd, env, api)


# ---------------------------------------------------------------- measuring a request


def _anthropic_texts(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _anthropic_texts(item)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind == "text":
            yield str(node.get("text", ""))
        elif kind == "thinking":
            yield str(node.get("thinking", ""))
        elif kind == "tool_use":
            yield json.dumps(node.get("input"), ensure_ascii=False)
        elif kind == "tool_result":
            yield from _anthropic_texts(node.get("content"))


def _inner_output(text: str) -> str:
    """Codex stores shell output as a JSON string ``{"output", "metadata"}``: its text."""
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            return str(value["output"])
    return text


def _responses_texts(items: Any) -> Iterator[str]:
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            content = item.get("content")
            if isinstance(content, str):
                yield content
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield part["text"]
        elif kind == "function_call":
            yield str(item.get("arguments", ""))
        elif kind == "custom_tool_call":
            yield str(item.get("input", ""))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out = item.get("output")
            if isinstance(out, str):
                yield _inner_output(out)
            for part in out if isinstance(out, list) else []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield part["text"]
        elif kind == "reasoning":
            for field in ("summary", "content"):
                for part in item.get(field) or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        yield part["text"]


@dataclass(frozen=True)
class Size:
    """How big one request was: its body, the conversation part, and that part's tokens."""

    body_bytes: int
    conversation_bytes: int
    conversation_tokens: int


def measure(request: Request) -> Size:
    """Size of a recorded request; tokens counted like ``ctx stats`` (cl100k, visible text)."""
    from ctxcli.services.tokens.engines import load_engine

    count = load_engine("cl100k")[1]
    body = request.body if isinstance(request.body, dict) else {}
    if "messages" in body:
        convo: Any = body["messages"]
        texts = list(_anthropic_texts([m.get("content") for m in convo if isinstance(m, dict)]))
    else:
        convo = body.get("input", [])
        texts = list(_responses_texts(convo))
    return Size(
        request.size,
        len(json.dumps(convo, ensure_ascii=False).encode()),
        sum(count(t) for t in texts),
    )


def ctx_json(*args: str) -> dict[str, Any]:
    """Run the ctx CLI of this checkout and parse its --json output."""
    proc = subprocess.run(
        [sys.executable, "-m", "ctxcli", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CTX_NO_PLUGINS": "1"},
    )
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def reduce(session: Path, preset: str, out: Path) -> dict[str, Any]:
    """``ctx reduce --preset PRESET`` into ``out``; the stats ``ctx stats`` predicted.

    The reduction runs in ``out``'s directory with the offload directory ``ctx stats``
    assumes (``ctx-offload``), so the hints it writes are the ones it counted.
    """
    stats = ctx_json("stats", str(session), "--preset", preset, "--on-invalid", "keep")
    predicted: dict[str, Any] = stats["files"][0]  # the file's report: resume tokens too
    subprocess.run(
        [
            *(sys.executable, "-m", "ctxcli", "reduce", str(session.resolve())),
            *("--preset", preset, "-o", out.name, "--offload-dir", "ctx-offload"),
            *("--force", "-q", "--on-invalid", "keep"),
        ],
        check=True,
        cwd=out.parent,
        env={**os.environ, "CTX_NO_PLUGINS": "1"},
    )
    return predicted


def reduced_copy(session: Path, preset: str, work: Path) -> tuple[Path, dict[str, Any]]:
    """:func:`reduce` into ``work/reduced/<name>``: (the reduced session, the prediction)."""
    out = work / "reduced" / session.name
    out.parent.mkdir(parents=True, exist_ok=True)
    return out, reduce(session, preset, out)


def predicted_share(stats: dict[str, Any]) -> float:
    """The share of a resume's tokens ``ctx stats`` says the reduction saves."""
    before = stats.get("resume_tokens_before") or stats["tokens_before"]
    after = stats.get("resume_tokens_after")
    if after is None:
        after = stats["tokens_after"]
    return 1 - after / before if before else 0.0
