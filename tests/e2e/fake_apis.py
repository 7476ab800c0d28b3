"""Loopback stand-ins for the Anthropic Messages API and the OpenAI Responses API.

The real Claude Code and Codex CLIs are pointed at these (``ANTHROPIC_BASE_URL``;
Codex's ``openai_base_url``) so a test sees exactly what a client sends when it resumes
a session, and the client sees answers shaped like the real ones:

- they **reject what the real APIs reject**, with the real status and error shape
  (``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}`` for
  Anthropic, ``{"error": {"message", "type", "param", "code"}}`` for OpenAI): a first
  message that is not the user's, ``tool_use`` without its ``tool_result`` in the next
  message and the reverse, empty or whitespace-only text blocks, thinking blocks without
  a signature, duplicate tool ids; Responses ``function_call``/``function_call_output``
  (and custom tool) pairs, reasoning items that stand for nothing (an id without
  ``encrypted_content`` under ``store: false``, or nothing after them), empty content;
- they answer a valid request with one short text turn (streaming SSE when asked, or a
  JSON body), with ``usage`` counted on the request;
- ``/v1/messages/count_tokens`` answers ``{"input_tokens": N}``; a WebSocket upgrade on
  ``/v1/responses`` gets HTTP 426 so Codex falls back to HTTP at once; Codex's remote
  compaction (``/v1/responses/compact``) gets exactly one ``compaction`` output item;
- every request is recorded (path, body, size, status, the rejection if any); no header
  is kept, so no key is ever stored.

Servers listen on 127.0.0.1 on a free port and stop by themselves after ``lifetime_s``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY_TEXT = "Resumed fine."


@dataclass
class Recorded:
    """One request a fake API received, and how it answered."""

    method: str
    path: str
    body: Any
    size: int
    status: int = 0
    error: str | None = None

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300


class Rejection(Exception):
    """What the real API would answer instead of a completion."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param


# ---------------------------------------------------------------- Anthropic Messages API


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _merge_turns(messages: list[Any]) -> list[tuple[str, list[Any], int]]:
    """Consecutive messages of one role, as the API combines them: (role, blocks, first index)."""
    turns: list[tuple[str, list[Any], int]] = []
    for i, msg in enumerate(messages):
        role = msg.get("role")
        blocks = _blocks(msg.get("content"))
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks), i))
    return turns


def check_messages(body: Any) -> None:
    """Raise :class:`Rejection` for what the Messages API refuses in ``body``."""
    if not isinstance(body, dict):
        raise Rejection("Request body must be a JSON object")
    if not isinstance(body.get("model"), str):
        raise Rejection("model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        raise Rejection("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejection("messages: at least one message is required")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise Rejection(f"messages.{i}: Input should be a valid dictionary")
        if msg.get("role") not in ("user", "assistant"):
            raise Rejection(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = msg.get("content")
        if not _blocks(content) and not (i == len(messages) - 1 and msg["role"] == "assistant"):
            raise Rejection(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for j, block in enumerate(_blocks(content)):
            _check_block(block, f"messages.{i}.content.{j}")
    if messages[0]["role"] != "user":
        raise Rejection('messages: first message must use the "user" role')
    seen_ids: set[str] = set()
    turns = _merge_turns(messages)
    for t, (role, blocks, index) in enumerate(turns):
        uses = [b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        results = [
            b.get("tool_use_id")
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if role == "assistant":
            if results:
                raise Rejection(
                    f"messages.{index}: `tool_result` blocks can only be in `user` messages"
                )
            for tid in uses:
                if tid in seen_ids:
                    raise Rejection(f"messages.{index}: `tool_use` ids must be unique")
                seen_ids.add(tid)
            answered = set()
            if t + 1 < len(turns):
                answered = {
                    b.get("tool_use_id")
                    for b in turns[t + 1][1]
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                }
            missing = [u for u in uses if u not in answered]
            if missing and t + 1 < len(turns):
                raise Rejection(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
        else:
            if uses:
                raise Rejection(
                    f"messages.{index}: `tool_use` blocks can only be in `assistant` messages"
                )
            previous = turns[t - 1][1] if t > 0 else []
            called = {
                b.get("id") for b in previous if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            stray = [r for r in results if r not in called]
            if stray:
                raise Rejection(
                    f"messages.{index}.content.0: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {stray[0]}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
    last = messages[-1]
    if last["role"] == "assistant":
        tail = _blocks(last.get("content"))
        if (
            tail
            and tail[-1].get("type") == "text"
            and tail[-1].get("text", "") != tail[-1].get("text", "").rstrip()
        ):
            raise Rejection("messages: final assistant content cannot end with trailing whitespace")


def _check_block(block: Any, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise Rejection(f"{where}: Input should be a valid dictionary with a type")
    kind = block["type"]
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise Rejection(f"{where}.text: Field required")
        if text == "":
            raise Rejection("messages: text content blocks must be non-empty")
        if not text.strip():
            raise Rejection("messages: text content blocks must contain non-whitespace text")
    elif kind == "thinking":
        if not isinstance(block.get("thinking"), str):
            raise Rejection(f"{where}.thinking.thinking: Field required")
        if not isinstance(block.get("signature"), str) or not block.get("signature"):
            raise Rejection(f"{where}.thinking.signature: Field required")
    elif kind == "redacted_thinking":
        if not isinstance(block.get("data"), str):
            raise Rejection(f"{where}.redacted_thinking.data: Field required")
    elif kind == "tool_use":
        if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
            raise Rejection(f"{where}.tool_use.id: Field required")
        if not isinstance(block.get("input"), dict):
            raise Rejection(f"{where}.tool_use.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str):
            raise Rejection(f"{where}.tool_result.tool_use_id: Field required")
        inner = block.get("content")
        if isinstance(inner, list):
            for k, part in enumerate(inner):
                _check_block(part, f"{where}.tool_result.content.{k}")
    elif kind not in (
        "image",
        "document",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
    ):
        raise Rejection(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags"
        )


def anthropic_input_tokens(body: dict[str, Any]) -> int:
    """A stable stand-in for the API's input token count (~4 bytes per token)."""
    seen = {k: body.get(k) for k in ("system", "messages", "tools")}
    return max(1, len(json.dumps(seen, ensure_ascii=False)) // 4)


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def anthropic_reply(body: dict[str, Any]) -> tuple[str, bytes]:
    """(content type, body) of a one-text-block answer, streamed when asked."""
    model = body.get("model", "claude")
    msg_id = f"msg_{uuid.uuid4().hex[:24]}"
    usage = {
        "input_tokens": anthropic_input_tokens(body),
        "output_tokens": 4,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if not body.get("stream"):
        message = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": REPLY_TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        return "application/json", json.dumps(message).encode()
    start = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": REPLY_TEXT},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 4},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "text/event-stream", _sse(events)


# ---------------------------------------------------------------- OpenAI Responses API

CALL_TYPES = {
    "function_call": "function",
    "custom_tool_call": "custom tool",
    "local_shell_call": "local shell",
}
OUTPUT_TYPES = {"function_call_output": "function", "custom_tool_call_output": "custom tool"}


def check_responses(body: Any) -> None:
    """Raise :class:`Rejection` for what the Responses API refuses in ``body``."""
    if not isinstance(body, dict):
        raise Rejection("Invalid body: expected a JSON object", param=None)
    if not isinstance(body.get("model"), str):
        raise Rejection("Missing required parameter: 'model'.", param="model")
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise Rejection("Missing required parameter: 'input'.", param="input")
    stateless = body.get("store") is False
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise Rejection(
                f"Invalid type for 'input[{i}]': expected an object.", param=f"input[{i}]"
            )
        kind = item.get("type", "message")
        if kind == "message":
            content = item.get("content")
            if isinstance(content, list) and not content:
                raise Rejection(
                    f"Invalid 'input[{i}].content': empty array. Expected an array with minimum "
                    "length 1, but got an empty array instead.",
                    param=f"input[{i}].content",
                )
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise Rejection(
                    f"Invalid value: '{item.get('role')}'. Supported values are: 'assistant', "
                    "'system', 'developer', and 'user'.",
                    param=f"input[{i}].role",
                )
        elif kind in CALL_TYPES:
            cid = item.get("call_id")
            if not isinstance(cid, str):
                raise Rejection(
                    f"Missing required parameter: 'input[{i}].call_id'.",
                    param=f"input[{i}].call_id",
                )
            calls[cid] = i
        elif kind in OUTPUT_TYPES:
            cid = item.get("call_id")
            if cid not in calls:
                raise Rejection(
                    f"No tool call found for {OUTPUT_TYPES[kind]} call output with call_id {cid}.",
                    param="input",
                )
            answered.add(str(cid))
        elif kind == "reasoning":
            rid = item.get("id")
            if stateless and not item.get("encrypted_content") and isinstance(rid, str):
                raise Rejection(
                    f"Item with id '{rid}' not found. Items are not persisted when `store` is set "
                    "to false. Try again with `store` set to true, or remove this item from your "
                    "input.",
                    status=404,
                    param="input",
                )
            following = items[i + 1] if i + 1 < len(items) else None
            if not isinstance(following, dict):
                raise Rejection(
                    f"Item '{rid or f'input[{i}]'}' of type 'reasoning' was provided without its "
                    "required following item.",
                    param="input",
                )
        elif kind == "compaction":
            if not isinstance(item.get("encrypted_content"), str):
                raise Rejection(
                    f"Missing required parameter: 'input[{i}].encrypted_content'.",
                    param=f"input[{i}].encrypted_content",
                )
    for cid, i in calls.items():
        if cid not in answered and items[i].get("type") != "local_shell_call":
            raise Rejection(f"No tool output found for function call {cid}.", param="input")


def responses_input_tokens(body: dict[str, Any]) -> int:
    seen = {k: body.get(k) for k in ("instructions", "input", "tools")}
    return max(1, len(json.dumps(seen, ensure_ascii=False)) // 4)


def _usage(body: dict[str, Any]) -> dict[str, Any]:
    tokens = responses_input_tokens(body)
    return {
        "input_tokens": tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens + 4,
    }


def responses_reply(body: dict[str, Any]) -> tuple[str, bytes]:
    """(content type, body) of a one-message answer, streamed (SSE) when asked."""
    resp_id = f"resp_{uuid.uuid4().hex[:24]}"
    item_id = f"msg_{uuid.uuid4().hex[:24]}"
    part = {"type": "output_text", "text": REPLY_TEXT, "annotations": []}
    item = {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    response = {
        "id": resp_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model"),
        "output": [item],
        "usage": _usage(body),
    }
    if not body.get("stream"):
        return "application/json", json.dumps(response).encode()
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": pending}),
        ("response.in_progress", {"type": "response.in_progress", "response": pending}),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
        ),
        (
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "part": {**part, "text": ""},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": REPLY_TEXT,
            },
        ),
        (
            "response.output_text.done",
            {
                "type": "response.output_text.done",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "text": REPLY_TEXT,
            },
        ),
        (
            "response.content_part.done",
            {
                "type": "response.content_part.done",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "part": part,
            },
        ),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    for n, (_name, data) in enumerate(events):
        data["sequence_number"] = n
    return "text/event-stream", _sse(events)


def is_compaction(body: Any) -> bool:
    """True for Codex's compaction request: its input ends with a ``compaction_trigger``."""
    items = body.get("input") if isinstance(body, dict) else None
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("type") == "compaction_trigger" for i in items
    )


def compaction_reply(body: dict[str, Any]) -> tuple[str, bytes]:
    """A compaction: exactly one ``compaction`` output item (streamed when asked)."""
    item = {
        "type": "compaction",
        "id": f"cmp_{uuid.uuid4().hex[:24]}",
        "encrypted_content": "fake-compaction-" + uuid.uuid4().hex,
    }
    response = {
        "id": f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model"),
        "output": [item],
        "usage": _usage(body),
    }
    if not body.get("stream"):
        return "application/json", json.dumps(response).encode()
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": pending}),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    for n, (_name, data) in enumerate(events):
        data["sequence_number"] = n
    return "text/event-stream", _sse(events)


# ---------------------------------------------------------------- the HTTP server


@dataclass
class FakeAPI:
    """A fake API server on 127.0.0.1; ``kind`` is "anthropic" or "openai"."""

    kind: str
    lifetime_s: float = 900.0
    requests: list[Recorded] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _timer: threading.Timer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, ctype: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                if ctype == "text/event-stream":
                    self.send_header("Cache-Control", "no-cache")
                self.send_header("request-id", f"req_{uuid.uuid4().hex[:20]}")
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                rec = Recorded("GET", path, None, 0)
                api.requests.append(rec)
                if self.headers.get("Upgrade", "").lower() == "websocket":
                    rec.status = 426
                    self._send(426, "application/json", b'{"error": "upgrade not supported"}')
                    return
                if path.endswith("/models"):
                    rec.status = 200
                    self._send(
                        200, "application/json", json.dumps({"data": [], "models": []}).encode()
                    )
                    return
                rec.status = 404
                self._send(404, "application/json", api._error_body("Not found", "not_found_error"))

            def do_HEAD(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                rec = Recorded("POST", path, body, len(raw))
                api.requests.append(rec)
                status, ctype, payload = api._answer(path, body, rec)
                rec.status = status
                self._send(status, ctype, payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _error_body(
        self, message: str, etype: str = "invalid_request_error", param: str | None = None
    ) -> bytes:
        if self.kind == "anthropic":
            return json.dumps(
                {
                    "type": "error",
                    "error": {"type": etype, "message": message},
                    "request_id": f"req_{uuid.uuid4().hex[:20]}",
                }
            ).encode()
        return json.dumps(
            {"error": {"message": message, "type": etype, "param": param, "code": None}}
        ).encode()

    def _answer(self, path: str, body: Any, rec: Recorded) -> tuple[int, str, bytes]:
        try:
            if self.kind == "anthropic" and path == "/v1/messages/count_tokens":
                if not isinstance(body, dict):
                    raise Rejection("Request body must be a JSON object")
                payload = {"input_tokens": anthropic_input_tokens(body)}
                return 200, "application/json", json.dumps(payload).encode()
            if self.kind == "anthropic" and path == "/v1/messages":
                check_messages(body)
                return 200, *anthropic_reply(body)
            if self.kind == "openai" and path == "/v1/responses/compact":
                check_responses({**body, "store": False} if isinstance(body, dict) else body)
                return 200, *compaction_reply(body)
            if self.kind == "openai" and path == "/v1/responses":
                check_responses(body)
                if is_compaction(body):
                    return 200, *compaction_reply(body)
                return 200, *responses_reply(body)
        except Rejection as exc:
            rec.error = exc.message
            status = exc.status
            etype = "invalid_request_error"
            return status, "application/json", self._error_body(exc.message, etype, exc.param)
        rec.error = "not found"
        return 404, "application/json", self._error_body(f"Unknown path {path}", "not_found_error")

    # -- what tests read

    def posts(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and r.path == path]

    def compactions(self) -> int:
        """How many compaction requests (Codex's remote compaction) arrived."""
        return sum(
            1
            for r in self.requests
            if r.path == "/v1/responses/compact"
            or (r.path == "/v1/responses" and is_compaction(r.body))
        )
