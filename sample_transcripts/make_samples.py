"""Regenerate the bundled sample transcripts (deterministic; ``python make_samples.py``).

The samples are synthetic but shaped like real coding-agent sessions (the layouts of
the real files described in ../shared/transcripts/FORMATS.md), so every README example
runs from the repository alone:

- ``openai_chat_support.jsonl``: an OpenAI-chat session (a user task, tool calls, long
  file reads, grep output, a failing then passing test run);
- ``claude_code_session.jsonl``: a Claude Code session (v2.1.x records: thinking,
  tool calls with their ``toolUseResult`` copies, ``progress`` records, a compaction,
  and one line a redaction tool broke, as ``ctx doctor`` finds in real sessions);
- ``codex_rollout.jsonl``: a Codex CLI rollout (encrypted reasoning, shell calls,
  ``apply_patch``, ``token_count`` events);
- ``sweagent_function_calling.traj``: a SWE-agent v1 trajectory (function calls,
  observations repeated in every step's ``messages``).

Each is built from a fixed seed: the same script gives the same bytes
(``python make_samples.py --check`` says whether the checked-in files are current).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def _code(rng: random.Random, lines: int) -> str:
    names = ["parse_config", "load_rows", "retry", "tokenize", "flush", "render", "merge"]
    out = []
    for i in range(lines):
        name = rng.choice(names)
        out.append(f"{i + 1:5}\tdef {name}_{i}(value, *, limit={rng.randint(1, 99)}):")
        out.append(f"{i + 1:5}\t    return _helper(value, limit) or {rng.randint(0, 999)}")
    return "\n".join(out)


def _grep(rng: random.Random, hits: int) -> str:
    files = ["src/app/models.py", "src/app/views.py", "src/app/cache.py", "tests/test_views.py"]
    return "\n".join(
        f"{rng.choice(files)}:{rng.randint(1, 900)}:    cache.get(key, default=None)  # hit {i}"
        for i in range(hits)
    )


def _pytest(failed: bool) -> str:
    body = "\n".join(f"tests/test_views.py::test_case_{i} PASSED" for i in range(120))
    tail = (
        "FAILED tests/test_views.py::test_cache_expiry - AssertionError: expected 300, got 0\n"
        "=========== 1 failed, 119 passed in 4.21s ==========="
        if failed
        else "=========== 120 passed in 4.02s ==========="
    )
    return f"============ test session starts ============\n{body}\n{tail}"


def openai_chat_support() -> list[dict[str, object]]:
    rng = random.Random(7)
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "The cache expiry test fails. Find out why and fix it."},
    ]
    steps = [
        ("grep", {"pattern": "cache.get", "path": "src"}, _grep(rng, 400)),
        ("read_file", {"path": "src/app/cache.py"}, _code(rng, 700)),
        ("run_tests", {"args": ["-x", "tests/test_views.py"]}, _pytest(True)),
        ("read_file", {"path": "src/app/views.py"}, _code(rng, 300)),
        ("edit_file", {"path": "src/app/cache.py", "old": "ttl=0", "new": "ttl=300"}, "ok"),
        ("run_tests", {"args": ["tests/test_views.py"]}, _pytest(False)),
    ]
    for i, (tool, args, output) in enumerate(steps):
        call_id = f"call_{i:02d}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": output})
    msgs.append(
        {
            "role": "assistant",
            "content": "Fixed: the cache TTL was 0; it is 300 again and tests pass.",
        }
    )
    return msgs


def _jsonl(records: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


# --- what the coding agents read: one small repository, seen through their tools ---------

_WORDS = (
    "cache config request response token session parser buffer stream worker retry "
    "timeout handler record schema client server value index batch merge flush limit"
).split()
FILES = [
    "src/shop/cache.py",
    "src/shop/views.py",
    "src/shop/models.py",
    "src/shop/settings.py",
    "tests/test_cache.py",
    "tests/test_views.py",
]


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


def source(rng: random.Random, lines: int) -> str:
    """A Python module of about ``lines`` lines."""
    out = ['"""' + " ".join(rng.sample(_WORDS, 6)).capitalize() + '."""', ""]
    while len(out) < lines:
        out.append(f"def {_ident(rng)}({_ident(rng)}, *, limit={rng.randint(1, 4096)}):")
        for _ in range(rng.randint(2, 7)):
            out.append(
                f"    {_ident(rng)} = {_ident(rng)}({_ident(rng)}, ttl={rng.randint(0, 900)})"
            )
        out.append(f"    return {_ident(rng)}")
        out.append("")
    return "\n".join(out[:lines])


def pytest_run(rng: random.Random, tests: int, failing: int) -> str:
    """A verbose pytest run in which ``failing`` tests fail."""
    lines = ["============================= test session starts =============================="]
    lines.append("platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0")
    bad = set(rng.sample(range(tests), failing))
    for i in range(tests):
        verdict = "FAILED" if i in bad else "PASSED"
        lines.append(f"tests/test_{rng.choice(_WORDS)}.py::test_{_ident(rng)}_{i} {verdict}")
    for i in sorted(bad):
        lines.append(f"___________________________ test_expiry_{i} ___________________________")
        lines.append(">       assert cache.ttl_seconds == 300")
        lines.append("E       AssertionError: assert 0 == 300")
    lines.append(
        f"======= {len(bad)} failed, {tests - len(bad)} passed in 3.{rng.randint(10, 99)}s ======="
    )
    return "\n".join(lines)


def grep_hits(rng: random.Random, hits: int) -> str:
    """ripgrep output: path:line:text."""
    return "\n".join(
        f"{rng.choice(FILES)}:{rng.randint(1, 400)}:    {_ident(rng)} = cache.get({_ident(rng)!r})"
        for _ in range(hits)
    )


class Clock:
    """Timestamps that advance a few seconds per record, from a fixed start."""

    def __init__(self, rng: random.Random, start: datetime) -> None:
        self.rng = rng
        self.now = start

    def tick(self, low: int = 1, high: int = 20) -> str:
        self.now += timedelta(
            seconds=self.rng.randint(low, high), milliseconds=self.rng.randint(0, 999)
        )
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.now.microsecond // 1000:03d}Z"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _token(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


_B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


# --- Claude Code ----------------------------------------------------------------------------

CLAUDE_SESSION_ID = "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c"
CLAUDE_CWD = "/home/me/shop"


class ClaudeSession:
    """Records of one Claude Code 2.1.x session, chained by ``parentUuid``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = Clock(self.rng, datetime(2026, 3, 2, 9, 14, 5, tzinfo=UTC))
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.context = 96_000  # tokens the API saw on the last call (usage)

    def envelope(self, kind: str, **fields: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CLAUDE_CWD,
            "sessionId": CLAUDE_SESSION_ID,
            "version": "2.1.39",
            "gitBranch": "fix/cache-expiry",
            "slug": "quiet-amber-harbor",
            "type": kind,
            **fields,
            "uuid": _uuid(self.rng),
            "timestamp": self.clock.tick(),
        }
        self.parent = rec["uuid"]
        self.records.append(rec)
        return rec

    def user(self, content: Any, **fields: Any) -> dict[str, Any]:
        return self.envelope("user", message={"role": "user", "content": content}, **fields)

    def response(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One API response: one assistant record per content block, as the client writes."""
        msg_id = "msg_01" + _token(self.rng, _B62, 22)
        request = "req_011C" + _token(self.rng, _B62, 20)
        self.context += self.rng.randint(400, 2500)
        out = []
        for k, block in enumerate(blocks):
            last = k == len(blocks) - 1
            usage = {
                "input_tokens": 4,
                "cache_creation_input_tokens": self.rng.randint(200, 3000),
                "cache_read_input_tokens": self.context,
                "output_tokens": self.rng.randint(40, 900) if last else 1,
                "service_tier": "standard",
            }
            message = {
                "model": "claude-sonnet-4-5",
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": ("tool_use" if block["type"] == "tool_use" else "end_turn")
                if last
                else None,
                "stop_sequence": None,
                "usage": usage,
            }
            out.append(self.envelope("assistant", message=message, requestId=request))
        return out

    def thinking(self, text: str) -> dict[str, Any]:
        signature = base64.b64encode(self.rng.randbytes(300)).decode()
        return {"type": "thinking", "thinking": text, "signature": signature}

    def tool_round(
        self, say: str, name: str, args: dict[str, Any], output: str, payload: Any
    ) -> str:
        """The agent thinks, says a line, calls one tool; the result comes back."""
        call_id = "toolu_01" + _token(self.rng, _B62, 22)
        blocks = [
            self.thinking(
                f"I should {say[0].lower()}{say[1:]} {' '.join(self.rng.sample(_WORDS, 8))}."
            ),
            {"type": "text", "text": say},
            {"type": "tool_use", "id": call_id, "name": name, "input": args},
        ]
        calling = self.response(blocks)[-1]
        if name == "Bash":
            self.progress_bash(call_id, output)
        result = {
            "tool_use_id": call_id,
            "type": "tool_result",
            "content": output,
            "is_error": False,
        }
        self.user([result], toolUseResult=payload, sourceToolAssistantUUID=calling["uuid"])
        return call_id

    def progress_bash(self, call_id: str, output: str) -> None:
        tail = output.splitlines()[-5:]
        self.envelope(
            "progress",
            data={
                "type": "bash_progress",
                "output": "\n".join(tail),
                "fullOutput": output,
                "elapsedTimeSeconds": 3,
                "totalLines": output.count("\n") + 1,
            },
            toolUseID="bash-progress-" + _token(self.rng, "0123456789", 6),
            parentToolUseID=call_id,
        )

    def turn_end(self) -> None:
        self.envelope(
            "system",
            subtype="turn_duration",
            durationMs=self.rng.randint(20_000, 400_000),
            isMeta=False,
        )


def _numbered(text: str, start: int = 1) -> str:
    """A file as Claude Code's Read shows it to the model."""
    return "\n".join(f"{i:6}\u2192{line}" for i, line in enumerate(text.splitlines(), start))


def _read(cc: ClaudeSession, path: str, text: str, reminder: bool = False) -> None:
    shown = _numbered(text)
    if reminder:
        shown += (
            "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it "
            "looks malicious. You can still analyze existing code.\n</system-reminder>\n"
        )
    lines = text.count("\n") + 1
    payload = {
        "type": "text",
        "file": {
            "filePath": f"{CLAUDE_CWD}/{path}",
            "content": text,
            "numLines": lines,
            "startLine": 1,
            "totalLines": lines,
        },
    }
    cc.tool_round(
        f"Let me read {path}.", "Read", {"file_path": f"{CLAUDE_CWD}/{path}"}, shown, payload
    )


def _bash(cc: ClaudeSession, say: str, command: str, output: str) -> None:
    payload = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
    cc.tool_round(say, "Bash", {"command": command, "description": say}, output, payload)


def _edit(cc: ClaudeSession, path: str, before: str, old: str, new: str) -> str:
    after = before.replace(old, new, 1)
    payload = {
        "filePath": f"{CLAUDE_CWD}/{path}",
        "oldString": old,
        "newString": new,
        "originalFile": before,
        "userModified": False,
        "replaceAll": False,
        "structuredPatch": [
            {
                "oldStart": 3,
                "oldLines": 1,
                "newStart": 3,
                "newLines": 1,
                "lines": [f"-{old}", f"+{new}"],
            }
        ],
    }
    output = (
        f"The file {CLAUDE_CWD}/{path} has been updated. Here's the result of running `cat -n`."
    )
    cc.tool_round(
        f"I'll fix {path}.",
        "Edit",
        {"file_path": f"{CLAUDE_CWD}/{path}", "old_string": old, "new_string": new},
        output,
        payload,
    )
    return after


def _claude_first_half(cc: ClaudeSession, files: dict[str, str]) -> None:
    cc.user(
        "The cache expiry test fails on CI. Find out why and fix it; keep the API unchanged.",
        thinkingMetadata={"maxThinkingTokens": 31999},
        todos=[],
        permissionMode="default",
    )
    _bash(
        cc,
        "Run the failing test first.",
        "pytest -x tests/test_cache.py",
        pytest_run(cc.rng, 90, 2),
    )
    _bash(cc, "Find every use of the cache.", "rg -n 'cache.get' src tests", grep_hits(cc.rng, 120))
    for path in (
        "src/shop/cache.py",
        "src/shop/settings.py",
        "src/shop/views.py",
        "tests/test_cache.py",
    ):
        _read(cc, path, files[path], reminder=path.endswith("cache.py"))
    cc.response(
        [
            {
                "type": "text",
                "text": "The TTL comes from settings.CACHE_TTL, which the test "
                "fixture overrides with 0. Next I check where the override is applied.",
            }
        ]
    )
    cc.turn_end()


def _compaction(cc: ClaudeSession) -> None:
    boundary = cc.envelope(
        "system",
        subtype="compact_boundary",
        content="Conversation compacted",
        isMeta=False,
        level="info",
        logicalParentUuid=cc.parent,
        compactMetadata={"trigger": "auto", "preTokens": 151_244},
    )
    boundary["parentUuid"] = None
    summary = (
        "This session is being continued from a previous conversation that ran out of context. "
        "The summary below covers the earlier portion of the conversation.\n\n"
        "1. The user asked to fix the failing cache expiry test without changing the API.\n"
        "2. pytest showed 2 failures in tests/test_cache.py (ttl 0 instead of 300).\n"
        "3. src/shop/settings.py reads CACHE_TTL; the test fixture overrides it with 0.\n"
        "4. Next: find where the override is applied, fix it, run the whole suite."
    )
    cc.user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)


def _broken_round(cc: ClaudeSession) -> None:
    """A tool result whose line a redaction tool broke (``\\[`` is not a JSON escape)."""
    found = "tests/conftest.py:12:    owner = 'REDACT_ME'"
    payload = {"mode": "content", "numFiles": 1, "filenames": [], "content": found, "numLines": 1}
    cc.tool_round(
        "Find who set the fixture up.",
        "Grep",
        {"pattern": "owner", "path": "tests"},
        found,
        payload,
    )


def claude_code_session() -> bytes:
    """The Claude Code sample: before a compaction, after it, and one broken line."""
    cc = ClaudeSession(seed=11)
    files = {path: source(cc.rng, cc.rng.choice((90, 140, 220))) for path in FILES}
    cc.records.append(
        {
            "type": "file-history-snapshot",
            "messageId": _uuid(cc.rng),
            "isSnapshotUpdate": False,
            "snapshot": {
                "messageId": _uuid(cc.rng),
                "trackedFileBackups": {},
                "timestamp": cc.clock.tick(),
            },
        }
    )
    _claude_first_half(cc, files)
    _compaction(cc)
    _read(cc, "tests/conftest.py", source(cc.rng, 160), reminder=True)
    _broken_round(cc)
    broken = len(cc.records) - 1
    _bash(cc, "Run the cache tests again.", "pytest tests/test_cache.py", pytest_run(cc.rng, 90, 2))
    files["src/shop/cache.py"] = _edit(
        cc,
        "src/shop/cache.py",
        files["src/shop/cache.py"],
        files["src/shop/cache.py"].splitlines()[2],
        "    ttl = settings.CACHE_TTL or 300",
    )
    _read(cc, "src/shop/cache.py", files["src/shop/cache.py"], reminder=True)
    _bash(cc, "Run the whole suite.", "pytest", pytest_run(cc.rng, 260, 0))
    _bash(
        cc,
        "Check the diff.",
        "git diff --stat",
        " src/shop/cache.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
    )
    cc.response(
        [
            cc.thinking("The suite passes; I can report the fix."),
            {
                "type": "text",
                "text": "Fixed: the cache fell back to a TTL of 0 when the fixture "
                "cleared CACHE_TTL; it now falls back to 300. All 260 tests pass.",
            },
        ]
    )
    cc.turn_end()
    lines = [json.dumps(r, ensure_ascii=False) for r in cc.records]
    # The redaction artefact real sessions carry: an e-mail replaced after JSON encoding,
    # leaving a backslash before '[' (cc_mclaude_c76e5be5 line 859 has the same fault).
    lines[broken] = lines[broken].replace("REDACT_ME", "dev\\[REDACTED_EMAIL]")
    return ("\n".join(lines) + "\n").encode()


# --- Codex CLI ------------------------------------------------------------------------------

CODEX_SESSION_ID = "01998f3a-6c2e-7d41-8b0f-5e2a9c7d4b13"
CODEX_CWD = "/home/me/shop"


class CodexRollout:
    """Records of one Codex CLI rollout (``{timestamp, type, payload}`` lines)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = Clock(self.rng, datetime(2026, 3, 3, 14, 2, 5, tzinfo=UTC))
        self.records: list[dict[str, Any]] = []
        self.context = 0
        self.spent: dict[str, int] = {}

    def add(self, kind: str, payload: dict[str, Any]) -> None:
        self.records.append({"timestamp": self.clock.tick(0, 4), "type": kind, "payload": payload})

    def message(self, role: str, text: str) -> None:
        kind = "input_text" if role == "user" else "output_text"
        self.add(
            "response_item",
            {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        )

    def reasoning(self, summary: str) -> None:
        self.add("event_msg", {"type": "agent_reasoning", "text": summary})
        blob = base64.urlsafe_b64encode(self.rng.randbytes(self.rng.randint(900, 2400))).decode()
        self.add(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": summary}],
                "content": None,
                "encrypted_content": "gAAAAAB" + blob,
            },
        )

    def token_count(self, grow: int) -> None:
        """The usage event after a model call: the context grew by ``grow`` tokens."""
        self.context += grow
        last = {
            "input_tokens": self.context,
            "cached_input_tokens": self.context - grow,
            "output_tokens": 300,
            "reasoning_output_tokens": 192,
            "total_tokens": self.context + 300,
        }
        self.spent = {k: self.spent.get(k, 0) + v for k, v in last.items()}
        info = {
            "total_token_usage": dict(self.spent),
            "last_token_usage": last,
            "model_context_window": 272_000,
        }
        self.add("event_msg", {"type": "token_count", "info": info})

    def shell(self, summary: str, command: str, output: str) -> None:
        self.reasoning(summary)
        call_id = "call_" + _token(self.rng, _B62, 24)
        args = {"command": ["bash", "-lc", command], "workdir": CODEX_CWD, "timeout_ms": 120000}
        self.add(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps(args),
                "call_id": call_id,
            },
        )
        result = {
            "output": output,
            "metadata": {"exit_code": 0, "duration_seconds": round(self.rng.random() * 4, 1)},
        }
        self.add(
            "response_item",
            {"type": "function_call_output", "call_id": call_id, "output": json.dumps(result)},
        )
        self.token_count(len(output) // 3 + 900)

    def patch(self, summary: str, path: str, old: str, new: str) -> None:
        self.reasoning(summary)
        call_id = "call_" + _token(self.rng, _B62, 24)
        body = f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"
        self.add(
            "response_item",
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": "apply_patch",
                "input": body,
            },
        )
        result = {
            "output": f"Success. Updated the following files:\nM {path}\n",
            "metadata": {"exit_code": 0, "duration_seconds": 0.0},
        }
        self.add(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": call_id, "output": json.dumps(result)},
        )
        self.token_count(1200)


def _codex_prologue(cx: CodexRollout, task: str) -> None:
    cx.add(
        "session_meta",
        {
            "id": CODEX_SESSION_ID,
            "timestamp": cx.clock.tick(0, 1),
            "cwd": CODEX_CWD,
            "originator": "codex_cli_rs",
            "cli_version": "0.40.0",
            "instructions": None,
            "git": {
                "commit_hash": _token(cx.rng, "0123456789abcdef", 40),
                "branch": "fix/cache-expiry",
                "repository_url": "git@example.com:me/shop.git",
            },
        },
    )
    env = (
        f"<environment_context>\n  <cwd>{CODEX_CWD}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
        "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
        "  <shell>bash</shell>\n</environment_context>"
    )
    cx.message("user", env)
    cx.add("event_msg", {"type": "user_message", "message": task, "kind": "plain"})
    cx.message("user", task)
    cx.add(
        "turn_context",
        {
            "cwd": CODEX_CWD,
            "approval_policy": "on-request",
            "sandbox_policy": {"mode": "workspace-write"},
            "model": "gpt-5-codex",
            "effort": "high",
            "summary": "auto",
        },
    )
    cx.context = 131_000  # the rollout continues a long conversation: its context is large


def codex_rollout() -> bytes:
    """The Codex sample: a long fix with shell calls, a patch and a final answer."""
    cx = CodexRollout(seed=23)
    files = {path: source(cx.rng, cx.rng.choice((220, 300, 380))) for path in FILES}
    _codex_prologue(cx, "The cache expiry test fails on CI. Find out why and fix it.")
    cx.shell(
        "**Running the failing test**", "pytest -x tests/test_cache.py", pytest_run(cx.rng, 120, 2)
    )
    cx.shell("**Searching for cache uses**", "rg -n 'cache.get' src tests", grep_hits(cx.rng, 150))
    for path in FILES:
        cx.shell(f"**Reading {path}**", f"sed -n '1,400p' {path}", files[path])
    cx.shell(
        "**Re-reading the cache module**",
        "sed -n '1,400p' src/shop/cache.py",
        files["src/shop/cache.py"],
    )
    cx.patch(
        "**Falling back to a TTL of 300**",
        "src/shop/cache.py",
        files["src/shop/cache.py"].splitlines()[2],
        "    ttl = settings.CACHE_TTL or 300",
    )
    cx.shell("**Running the whole suite**", "pytest", pytest_run(cx.rng, 300, 0))
    answer = "Fixed: the cache fell back to a TTL of 0 when CACHE_TTL was unset; it now uses 300. All tests pass."
    cx.add("event_msg", {"type": "agent_message", "message": answer})
    cx.message("assistant", answer)
    return _jsonl(cx.records)


# --- SWE-agent ------------------------------------------------------------------------------


def _observation(text: str, open_file: str) -> str:
    body = text.replace("\n", "\r\n")
    return f"{body}\n(Open file: {open_file})\n(Current directory: /testbed)\nbash-$"


def _swe_steps(rng: random.Random, files: dict[str, str]) -> Iterator[tuple[str, str, str, str]]:
    """(thought, command, observation, open file) of each step."""
    yield "List the repository first.", "ls -F", "README.md  pyproject.toml  src/  tests/", "n/a"
    yield "Search for the TTL setting.", "search_dir CACHE_TTL", grep_hits(rng, 20), "n/a"
    yield (
        "Find the settings module.",
        "find_file settings.py",
        "Found 1 matches:\nsrc/shop/settings.py",
        "n/a",
    )
    for path in FILES[:4]:
        shown = _numbered(files[path]).replace("\u2192", ":")
        yield f"Open {path} to see how it uses the cache.", f"open {path}", shown, path
    yield (
        "Go to the fallback.",
        "goto 3",
        "[File: src/shop/cache.py (60 lines total)]",
        "src/shop/cache.py",
    )
    for page in range(2):
        yield (
            "Scroll down to see the rest.",
            "scroll_down",
            _numbered(source(rng, 30), 41 + 30 * page).replace("\u2192", ":"),
            "src/shop/cache.py",
        )
    yield (
        "Reproduce the failure.",
        "python -m pytest -x tests/test_cache.py",
        pytest_run(rng, 25, 2),
        "src/shop/cache.py",
    )
    yield (
        "Fix the fallback TTL.",
        "edit 3:3\n    ttl = settings.CACHE_TTL or 300\nend_of_edit",
        "File updated.",
        "src/shop/cache.py",
    )
    yield (
        "Run the tests again.",
        "python -m pytest tests/test_cache.py",
        pytest_run(rng, 25, 0),
        "src/shop/cache.py",
    )
    yield "Run the whole suite.", "python -m pytest", pytest_run(rng, 40, 0), "src/shop/cache.py"
    yield (
        "Everything passes; submit.",
        "submit",
        "diff --git a/src/shop/cache.py b/src/shop/cache.py",
        "src/shop/cache.py",
    )


def sweagent_trajectory() -> bytes:
    """The SWE-agent sample: a v1 function-calling ``.traj`` with 17 observations."""
    rng = random.Random(31)
    files = {path: source(rng, rng.choice((20, 30, 40))) for path in FILES}
    history: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "SETTING: You are an autonomous programmer working in a command line "
            "with a special interface.",
            "agent": "main",
            "message_type": "system_prompt",
        },
        {
            "role": "user",
            "content": "We're currently solving the following issue within our repository.\n"
            "ISSUE:\nCache entries expire immediately when CACHE_TTL is unset.\n",
            "agent": "main",
            "message_type": "observation",
        },
    ]
    trajectory: list[dict[str, Any]] = []
    for thought, command, output, open_file in _swe_steps(rng, files):
        call_id = "call_" + _token(rng, _B62, 22)
        call = {
            "function": {"arguments": json.dumps({"command": command}), "name": "bash"},
            "id": call_id,
            "type": "function",
        }
        history.append(
            {
                "role": "assistant",
                "content": thought,
                "thought": thought,
                "action": command,
                "agent": "main",
                "tool_calls": [call],
                "message_type": "action",
            }
        )
        observation = _observation(output, open_file)
        history.append(
            {
                "role": "tool",
                "content": observation,
                "agent": "main",
                "message_type": "observation",
                "tool_call_ids": [call_id],
            }
        )
        trajectory.append(
            {
                "action": command,
                "observation": observation,
                "response": thought,
                "thought": thought,
                "execution_time": round(0.05 + rng.random() * 3, 3),
                "state": {"open_file": open_file, "working_dir": "/testbed"},
                "messages": [dict(m) for m in history[:-1]],
            }
        )
    info = {
        "submission": "diff --git a/src/shop/cache.py b/src/shop/cache.py\n",
        "exit_status": "submitted",
        "model_stats": {
            "instance_cost": 0.41,
            "tokens_sent": 182_220,
            "tokens_received": 2_911,
            "api_calls": len(trajectory),
        },
    }
    doc = {"trajectory": trajectory, "history": history, "info": info, "environment": "main"}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


SAMPLES: dict[str, Callable[[], bytes]] = {
    "openai_chat_support.jsonl": lambda: _jsonl(openai_chat_support()),
    "claude_code_session.jsonl": claude_code_session,
    "codex_rollout.jsonl": codex_rollout,
    "sweagent_function_calling.traj": sweagent_trajectory,
}


def main() -> int:
    """Write every sample, or with --check report whether the checked-in ones are current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a sample differs")
    args = parser.parse_args()
    stale = []
    for name, make in SAMPLES.items():
        data = make()
        path = HERE / name
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(name)
        else:
            path.write_bytes(data)
    for name in stale:
        print(f"{name} is stale: run python sample_transcripts/make_samples.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
