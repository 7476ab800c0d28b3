"""A loopback Anthropic Messages API that plays a long tool-heavy agent run and bills like the real one.

It answers ``POST /v1/messages`` (SSE when ``stream`` is true, JSON otherwise) from a
script: the *main* request (one that offers a ``Read`` tool) gets the next step of
``steps`` (a Read or Bash tool call), then one Bash ``cat`` of the first offloaded file a ctx
hint names (the agent reading back what was offloaded), then a final answer. Side requests
(no tools: titles, summaries) get a short text.

It rejects what the real API rejects (400, ``invalid_request_error``): a ``tool_result``
that does not answer a ``tool_use`` of the message before it, a ``tool_use`` left without
its result, empty text blocks, a first message that is not the user's, more than four
``cache_control`` breakpoints, a breakpoint on a thinking block.

Prompt caching is simulated on its own (not with the proxy's code): the prompt is cut into
blocks (each tool, each system block, each content block; a message whose content is a
string is one block), a block counts the cl100k tokens of its JSON with sorted keys and no
``cache_control``; the longest prefix identical to a prefix that an earlier request ended
at one of its breakpoints is a cache read, the rest up to this request's last breakpoint
is a cache write, the remainder is plain input. ``usage`` in the answer reports these.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ctxcli.services.engines import load_engine

_, _COUNT = load_engine("cl100k")


@dataclass
class Step:
    """One scripted tool call."""

    tool: str
    input: dict[str, Any]
    say: str = ""


@dataclass
class Totals:
    requests: int = 0
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def billed(self, read: float = 0.1, write: float = 1.25) -> float:
        return self.input_tokens + write * self.cache_write + read * self.cache_read


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _key(value: Any) -> str:
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def blocks(body: dict[str, Any]) -> list[tuple[bytes, int, bool]]:
    """(identity, tokens, has breakpoint) of every block in cache order."""
    out: list[tuple[bytes, int, bool]] = []

    def add(tag: str, value: Any) -> None:
        text = _key(value)
        bp = isinstance(value, dict) and "cache_control" in value
        out.append(((tag + text).encode(), _COUNT(text), bp))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str) and system:
        add("system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for item in system:
            add("system", item)
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, list) and content:
            head = {k: v for k, v in msg.items() if k != "content"}
            for i, part in enumerate(content):
                add("m" + _key(head) if i == 0 else "p", part)
        else:
            add("m" + str(msg.get("role")), msg)
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def problems(body: dict[str, Any]) -> list[str]:
    """What the real Messages API would reject in ``body``."""
    found: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: field required"]
    if messages[0].get("role") != "user":
        found.append("messages: first message must use the user role")
    breakpoints = sum(1 for b in blocks(body) if b[2])
    if breakpoints > 4:
        found.append(
            f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        )
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        if msg.get("role") not in ("user", "assistant", "system"):  # Claude Code sends system
            found.append(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
        content = msg.get("content")
        parts = content if isinstance(content, list) else []
        if isinstance(content, list) and not content and i < len(messages) - 1:
            found.append(f"messages.{i}: content must be non-empty")
        if isinstance(content, str) and not content and i < len(messages) - 1:
            found.append(f"messages.{i}: content must be non-empty")
        results = {p.get("tool_use_id") for p in parts if p.get("type") == "tool_result"}
        if msg.get("role") == "user":
            if pending - results:
                found.append(
                    f"messages.{i}: tool_use ids were found without tool_result blocks "
                    f"immediately after: {sorted(pending - results)}"
                )
            if results - pending:
                found.append(
                    f"messages.{i}: unexpected tool_use_id found in tool_result blocks: "
                    f"{sorted(results - pending)}"
                )
            pending = set()
        else:
            if pending:
                found.append(f"messages.{i}: tool_use without tool_result: {sorted(pending)}")
            pending = {p.get("id") for p in parts if p.get("type") == "tool_use"}
        for j, part in enumerate(parts):
            if part.get("type") == "text" and not part.get("text"):
                found.append(
                    f"messages.{i}.content.{j}.text: text content blocks must be non-empty"
                )
            if part.get("type") in ("thinking", "redacted_thinking") and "cache_control" in part:
                found.append(f"messages.{i}.content.{j}: thinking blocks cannot have cache_control")
    return found


@dataclass
class FakeAnthropic:
    """The server; use as a context manager. ``base_url`` is what a client points at."""

    steps: list[Step]
    offload_dir: str = ""
    cache: set[bytes] = field(default_factory=set)
    totals: Totals = field(default_factory=Totals)
    rejected: list[tuple[str, list[str]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    originals: dict[str, str] = field(default_factory=dict)
    readback: dict[str, Any] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                fake.paths.append(self.path)
                if self.path.endswith("/chat/completions"):  # enough of OpenAI for ctx wrap codex
                    fake.totals.requests += 1
                    answer = {
                        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                    }
                    return self._json(200, answer)
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    if "count_tokens" in self.path:
                        body = json.loads(raw)
                        n = sum(b[1] for b in blocks(body))
                        return self._json(200, {"input_tokens": n})
                    return self._json(
                        404,
                        {
                            "type": "error",
                            "error": {"type": "not_found_error", "message": self.path},
                        },
                    )
                body = json.loads(raw)
                status, answer = fake.answer(body)
                if status != 200 or not body.get("stream"):
                    return self._json(status, answer)
                self._sse(answer)

            def do_GET(self) -> None:  # noqa: N802
                fake.paths.append(self.path)
                self._json(
                    404,
                    {"type": "error", "error": {"type": "not_found_error", "message": self.path}},
                )

            def do_HEAD(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for event in sse_events(message):
                    self.wfile.write(event)
                    self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- billing -------------------------------------------------------------------------
    def bill(self, body: dict[str, Any]) -> dict[str, int]:
        cut = blocks(body)
        hashes: list[bytes] = []
        running = hashlib.sha256()
        cumulative: list[int] = []
        total = 0
        for ident, tokens, _bp in cut:
            running.update(hashlib.sha256(ident).digest())
            hashes.append(running.copy().digest())
            total += tokens
            cumulative.append(total)
        marks = [i for i, b in enumerate(cut) if b[2]]
        last = marks[-1] if marks else -1
        read = next((cumulative[i] for i in range(last, -1, -1) if hashes[i] in self.cache), 0)
        write = max(0, (cumulative[last] if last >= 0 else 0) - read)
        self.cache.update(hashes[i] for i in marks)
        return {
            "input_tokens": total - read - write,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }

    # -- the script ----------------------------------------------------------------------
    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append(body)
            bad = problems(body)
            if bad:
                self.rejected.append((json.dumps(body)[:300], bad))
                return 400, {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "; ".join(bad)},
                }
            usage = self.bill(body)
            self.totals.requests += 1
            self.totals.input_tokens += usage["input_tokens"]
            self.totals.cache_read += usage["cache_read_input_tokens"]
            self.totals.cache_write += usage["cache_creation_input_tokens"]
            content, stop = self._next(body)
        message = {
            "id": f"msg_{self.totals.requests:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-sonnet-4-5"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 20},
        }
        return 200, message

    def _next(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        tools = {t.get("name") for t in body.get("tools") or []}
        if "Read" not in tools:
            return [{"type": "text", "text": "Scripted run"}], "end_turn"
        results: list[tuple[str, str]] = []
        for msg in body["messages"]:
            for part in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if part.get("type") == "tool_result":
                    results.append((part["tool_use_id"], _text(part.get("content"))))
        for use_id, text in results:
            if "ctx:" not in text:
                self.originals.setdefault(use_id, text)
        done = len(results)
        if done < len(self.steps):
            step = self.steps[done]
            return _tool(f"toolu_{done:04d}", step.tool, step.input, step.say), "tool_use"
        if done == len(self.steps) and self.offload_dir:
            pattern = re.escape(self.offload_dir.rstrip("/")) + r"/[^\s\]\)\"']+"
            for use_id, text in results:
                found = re.search(pattern, text)
                if found:
                    self.readback = {"tool_use_id": use_id, "path": found.group(0)}
                    command = {"command": f"cat {found.group(0)}", "description": "read back"}
                    return _tool(
                        f"toolu_{done:04d}", "Bash", command, "Reading it back."
                    ), "tool_use"
            self.readback = {"error": "no ctx hint naming the offload directory was sent"}
        if self.readback.get("path") and "text" not in self.readback:
            self.readback["text"] = results[-1][1]
        return [{"type": "text", "text": "All files read. Done."}], "end_turn"


def _tool(use_id: str, name: str, args: dict[str, Any], say: str) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if say:
        content.append({"type": "text", "text": say})
    content.append({"type": "tool_use", "id": use_id, "name": name, "input": args})
    return content


def sse_events(message: dict[str, Any]) -> list[bytes]:
    """The Messages streaming events for a complete ``message``."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    out = [event("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            out.append(
                event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            out.append(
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
            )
        else:
            head = {**block, "input": {}}
            out.append(
                event(
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": head},
                )
            )
            out.append(
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                )
            )
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    out.append(event("message_delta", delta))
    out.append(event("message_stop", {"type": "message_stop"}))
    return out
