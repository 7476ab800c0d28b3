"""The Anthropic Messages API, faked: refuses what the real one refuses, answers like it.

:class:`MessagesAPI` is a handler for :class:`~support.fake_api.server.FakeServer`:
``POST /v1/messages`` is checked with the proxy's own rule set
(:mod:`ctxcli.proxy.rules`: the real API's rules, in its words) and answered 400
``invalid_request_error`` when it breaks one, else with the turn its ``respond`` callable
makes (one text block by default), as JSON or as the streaming events when ``stream`` is
true; ``/v1/messages/count_tokens`` answers ``{"input_tokens": N}``; ``GET /v1/models`` a
list; anything else 404 in the API's error shape.

Three ways to use it:

- the SDK tests: :class:`AnthropicServer` plus the reply builders (``message``,
  ``rate_limited``, ``server_error``, ``timeout``, ``garbage``) script what the official
  ``anthropic`` SDK meets, retries and timeouts included;
- the resume tests: ``FakeServer(MessagesAPI())`` answers every valid turn;
- the proxy tests and the bench: :class:`ScriptedAgent` plays a long tool-heavy run (the
  next Read or Bash call, then reading an offloaded file back) and bills like prompt
  caching, simulated on its own (not with the proxy's code).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli.proxy.rules import rejection
from ctxcli.services.tokens.engines import load_engine
from support.fake_api.server import FakeServer, Handler, Reply, Request, content_text, sse

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
REPLY_TEXT = "Resumed fine."
MIN_CACHED_TOKENS = 1024
"""The shortest prefix the API caches (Claude Sonnet and Opus)."""
_, _COUNT = load_engine("cl100k")


@dataclass
class Turn:
    """What the fake model says: content blocks, why it stopped, the usage it reports."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    usage: dict[str, int] | None = None
    model: str | None = None


def error_body(kind: str, message: str) -> dict[str, Any]:
    """An error in the API's JSON shape."""
    request_id = f"req_{uuid.uuid4().hex[:20]}"
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


def input_tokens(body: dict[str, Any]) -> int:
    """A stable stand-in for the API's input token count (~4 bytes per token)."""
    seen = {k: body.get(k) for k in ("system", "messages", "tools")}
    return max(1, len(json.dumps(seen, ensure_ascii=False)) // 4)


def text_turn(text: str = REPLY_TEXT) -> Callable[[dict[str, Any]], Turn]:
    """A model that answers every turn with ``text``."""
    return lambda body: Turn([{"type": "text", "text": text}])


class MessagesAPI:
    """The Messages API as a :class:`FakeServer` handler.

    Args:
        respond: the model: the turn to answer a valid request with.
        count: the input tokens of a request body (count_tokens and ``usage``).
    """

    def __init__(
        self,
        respond: Callable[[dict[str, Any]], Turn] | None = None,
        *,
        count: Callable[[dict[str, Any]], int] = input_tokens,
    ) -> None:
        self.respond = respond or text_turn()
        self.count = count

    def __call__(self, request: Request) -> Reply:
        body = request.body
        if request.method == "POST" and request.path == COUNT_TOKENS and isinstance(body, dict):
            return Reply(body={"input_tokens": self.count(body)})
        if request.method == "POST" and request.path == MESSAGES:
            bad = rejection("anthropic", body)
            if bad is not None:
                request.error = bad.message
                return Reply(bad.status, error_body("invalid_request_error", bad.message))
            return reply_for(body, self.respond(body), self.count(body))
        if request.method == "GET" and request.path == "/v1/models":
            return Reply(body={"data": [], "has_more": False})
        request.error = "not found"
        return Reply(404, error_body("not_found_error", f"Unknown path {request.path}"))


def reply_for(body: dict[str, Any], turn: Turn, tokens: int) -> Reply:
    """The answer to ``body``: ``turn`` as a message, streamed when the request asked."""
    usage = turn.usage or {
        "input_tokens": tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 4,
    }
    message = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": turn.model or body.get("model", "claude"),
        "content": turn.content,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return Reply(body=message)
    return Reply(
        headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
        chunks=sse(message_events(message)),
    )


def message_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Messages streaming events of a complete ``message``."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            head: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            head = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": head},
            )
        )
        if i == 0:
            events.append(("ping", {"type": "ping"}))
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# -- the SDK tests: a server with scripted replies ---------------------------------------


def message(text: str, *, model: str = "claude-haiku-4-5", stop_reason: str = "end_turn") -> Reply:
    """A successful Messages API response holding one text block."""
    turn = Turn(
        [{"type": "text", "text": text}],
        stop_reason,
        {"input_tokens": 10, "output_tokens": 10},
        model,
    )
    return reply_for({}, turn, 10)


def tokens(n: int) -> Reply:
    """A successful count_tokens response."""
    return Reply(body={"input_tokens": n})


def api_error(status: int, kind: str, text: str, retry_after_ms: int | None = 1) -> Reply:
    """An error in the API's JSON shape; ``retry_after_ms`` keeps SDK retries instant."""
    headers = {} if retry_after_ms is None else {"retry-after-ms": str(retry_after_ms)}
    return Reply(status, error_body(kind, text), headers=headers)


def rate_limited(retry_after_ms: int = 1) -> Reply:
    """HTTP 429, which the SDK retries."""
    return api_error(
        429, "rate_limit_error", "Number of requests has exceeded your rate limit.", retry_after_ms
    )


def server_error(status: int = 500, retry_after_ms: int = 1) -> Reply:
    """HTTP 5xx, which the SDK retries."""
    return api_error(status, "api_error", "Internal server error.", retry_after_ms)


def garbage() -> Reply:
    """HTTP 200 whose body is not JSON."""
    return Reply(200, b"<html>502 upstream hiccup</html>", {"content-type": "text/html"})


def timeout(seconds: float = 5.0) -> Reply:
    """A success that arrives only after ``seconds`` (set the client timeout lower)."""
    late = message("late")
    late.delay = seconds
    return late


def _word_count(body: dict[str, Any]) -> int:
    messages = body.get("messages") or []
    text = "\n".join(content_text(m.get("content")) for m in messages if isinstance(m, dict))
    return 7 + len(text.split())


class AnthropicServer(FakeServer):
    """A fake Messages API for the SDK tests: "ok" to every valid turn, 7 + words counted.

    ``handler`` replaces the whole API (a hostile endpoint, say); replies queued with
    :meth:`push` come first either way.
    """

    def __init__(self, handler: Handler | None = None, *, lifetime_s: float = 900.0) -> None:
        default = MessagesAPI(lambda body: message_turn("ok"), count=_word_count)
        super().__init__(handler or default, lifetime_s=lifetime_s)


def message_turn(text: str) -> Turn:
    return Turn([{"type": "text", "text": text}], usage={"input_tokens": 10, "output_tokens": 10})


# -- the proxy tests and the bench: a scripted agent run, billed like prompt caching ------


@dataclass
class Step:
    """One scripted tool call."""

    tool: str
    input: dict[str, Any]
    say: str = ""


@dataclass
class Totals:
    """What the fake billed over a run."""

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


IMAGE_TOKENS = 1600
"""What the fake bills for an image, whatever its bytes (the provider sizes it by its pixels)."""


def read_tokens(value: Any) -> int:
    """cl100k tokens of what the model reads of one block (a string is a text).

    Text, thinking: the text; a tool call: its id, name and its input's JSON; a tool result:
    its call's id, its text, and each image in it; an image: :data:`IMAGE_TOKENS`; anything
    else (a tool definition): its JSON. The ids are billed: a recorded session's input per
    request grows with its tool calls by about what their ids count (``ctxcli.cost``'s
    replay, issue 44).
    """
    if isinstance(value, str):
        return _COUNT(value)
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return _COUNT(str(value.get("text", "")))
    if kind == "thinking":
        return _COUNT(str(value.get("thinking", "")))
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "tool_use":
        args = json.dumps(value.get("input"), separators=(",", ":"), ensure_ascii=False)
        return _COUNT(f"{value.get('id', '')}\n{value.get('name', '')}\n{args}")
    if kind == "tool_result":
        content = value.get("content")
        call = value.get("tool_use_id", "")
        if isinstance(content, str):
            return _COUNT(f"{call}\n{content}")
        parts = [p for p in content or [] if isinstance(p, dict)]
        images = sum(1 for p in parts if p.get("type") == "image")
        texts = "\n".join(str(p["text"]) for p in parts if "text" in p)
        return _COUNT(f"{call}\n{texts}") + IMAGE_TOKENS * images
    return _COUNT(_key(value))


def cache_blocks(body: dict[str, Any]) -> list[tuple[bytes, int, bool]]:
    """(identity, cl100k tokens, has a breakpoint) of every block, in cache order.

    A block is each tool, each system block, each content block of a message, known by its
    role and its JSON (a string content is the text block it stands for). Its tokens are
    those of what the model reads of it (:func:`read_tokens`).
    """
    out: list[tuple[bytes, int, bool]] = []

    def add(tag: str, value: Any) -> None:
        bp = isinstance(value, dict) and "cache_control" in value
        out.append(((tag + _key(value)).encode(), read_tokens(value), bp))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str) and system:
        add("system", system)
    elif isinstance(system, list):
        for item in system:
            add("system", item)
    for msg in body.get("messages") or []:
        content = msg.get("content")
        # A string content is the text block it stands for: the same tokens to the model.
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content else []
        for part in content if isinstance(content, list) else []:
            add(str(msg.get("role")), part)
    return out


@dataclass
class ScriptedAgent:
    """The model of a long tool-heavy run, billing like prompt caching.

    A *main* request (one that offers a ``Read`` tool) gets the next step of ``steps``,
    then one Bash ``cat`` (or ``Read``: ``readback_tool``) of the first offloaded file a ctx
    hint names (the agent reading
    back what was offloaded), then a final answer. Side requests (no tools: titles,
    summaries) get a short text. Billing: the longest prefix identical to a prefix an
    earlier request ended at one of its breakpoints is a cache read, the rest up to this
    request's last breakpoint is a cache write, the remainder is plain input; a prefix shorter
    than 1,024 tokens is never cached.
    """

    steps: list[Step]
    offload_dir: str = ""
    readback_tool: str = "Bash"
    """How the agent reads the cited file back: ``Bash`` (``cat``) or ``Read``."""
    cache: set[bytes] = field(default_factory=set)
    totals: Totals = field(default_factory=Totals)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    originals: dict[str, str] = field(default_factory=dict)
    readback: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, *, lifetime_s: float = 1800.0) -> FakeServer:
        """A fake Messages API with this agent as its model."""
        return FakeServer(MessagesAPI(self.respond), lifetime_s=lifetime_s)

    def respond(self, body: dict[str, Any]) -> Turn:
        with self.lock:
            self.bodies.append(body)
            usage = self.bill(body)
            self.totals.requests += 1
            self.totals.input_tokens += usage["input_tokens"]
            self.totals.cache_read += usage["cache_read_input_tokens"]
            self.totals.cache_write += usage["cache_creation_input_tokens"]
            content, stop = self._next(body)
        return Turn(content, stop, {**usage, "output_tokens": 20}, body.get("model"))

    def bill(self, body: dict[str, Any]) -> dict[str, int]:
        cut = cache_blocks(body)
        hashes: list[bytes] = []
        running = hashlib.sha256()
        cumulative: list[int] = []
        total = 0
        for ident, count, _bp in cut:
            running.update(hashlib.sha256(ident).digest())
            hashes.append(running.copy().digest())
            total += count
            cumulative.append(total)
        # Like the real API, a prefix shorter than the minimum is never cached.
        marks = [i for i, b in enumerate(cut) if b[2] and cumulative[i] >= MIN_CACHED_TOKENS]
        last = marks[-1] if marks else -1
        read = next((cumulative[i] for i in range(last, -1, -1) if hashes[i] in self.cache), 0)
        write = max(0, (cumulative[last] if last >= 0 else 0) - read)
        self.cache.update(hashes[i] for i in marks)
        return {
            "input_tokens": total - read - write,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }

    def _next(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        tools = {t.get("name") for t in body.get("tools") or []}
        if "Read" not in tools:
            return [{"type": "text", "text": "Scripted run"}], "end_turn"
        results = _tool_results(body)
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
                    if self.readback_tool == "Read":
                        args: dict[str, Any] = {"file_path": found.group(0)}
                    else:
                        args = {"command": f"cat {found.group(0)}", "description": "read back"}
                    return _tool(
                        f"toolu_{done:04d}", self.readback_tool, args, "Reading it back."
                    ), "tool_use"
            self.readback = {"error": "no ctx hint naming the offload directory was sent"}
        if self.readback.get("path") and "text" not in self.readback:
            self.readback["text"] = results[-1][1]
        return [{"type": "text", "text": "All files read. Done."}], "end_turn"


def _tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    results: list[tuple[str, str]] = []
    for msg in body["messages"]:
        for part in msg.get("content") if isinstance(msg.get("content"), list) else []:
            if part.get("type") == "tool_result":
                results.append((part["tool_use_id"], content_text(part.get("content"))))
    return results


def _tool(use_id: str, name: str, args: dict[str, Any], say: str) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if say:
        content.append({"type": "text", "text": say})
    content.append({"type": "tool_use", "id": use_id, "name": name, "input": args})
    return content


def scripted_project(root: Path, turns: int = 40, lines: int = 150) -> list[Step]:
    """Write ``turns`` large source files under ``root``; one Read or Bash step per file."""
    steps: list[Step] = []
    for i in range(turns):
        path = root / f"module_{i:02d}.py"
        body = "".join(
            f"def handler_{i}_{n}(request, retries={n % 7}):\n"
            f"    return dispatch(request, route='/api/v{i}/item/{n}', retries=retries)\n"
            for n in range(lines)
        )
        path.write_text(body)
        if i % 3 == 2:
            steps.append(Step("Bash", {"command": f"cat {path}", "description": "Show the file"}))
        else:
            steps.append(Step("Read", {"file_path": str(path)}, f"Reading module {i}."))
    return steps
