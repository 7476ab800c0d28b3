"""The OpenAI Responses and Chat Completions APIs, faked: refusing what the real ones refuse.

:class:`OpenAIAPI` is a handler for :class:`~support.fake_api.server.FakeServer`. Requests
are checked with the proxy's rule set (:mod:`ctxcli.proxy.rules`) and refused in the
API's error shape (``{"error": {"message", "type", "param", "code"}}``, 400 or the
404 of an unknown stored item); a valid one gets one short assistant message, streamed
(SSE) when asked, with ``usage`` counted on the request. Codex's remote compaction
(``/v1/responses/compact``, or an input ending in ``compaction_trigger``) gets exactly one
``compaction`` output item. ``GET /v1/models`` answers a list.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ctxcli.proxy.rules import Rejection, check_chat, check_responses
from support.fake_api.server import FakeServer, Reply, Request, sse

REPLY_TEXT = "Resumed fine."
RESPONSES = "/v1/responses"
COMPACT = "/v1/responses/compact"
CHAT = "/v1/chat/completions"


def error_body(
    message: str, kind: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """An error in the API's JSON shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


class OpenAIAPI:
    """The Responses and Chat Completions APIs as a :class:`FakeServer` handler.

    Args:
        answer: the text of every assistant message.
        outputs: a script for an agent loop: each valid Responses request gets the next
            list of output items (function calls, a final message) instead of the one
            message; a request after the last is refused.
    """

    def __init__(
        self, answer: str = REPLY_TEXT, outputs: list[list[dict[str, Any]]] | None = None
    ) -> None:
        self.answer = answer
        self.outputs = None if outputs is None else list(outputs)

    def __call__(self, request: Request) -> Reply:
        body = request.body
        if request.method == "GET" and request.path == "/v1/models":
            # "models" too: Codex reads its model list from that key.
            return Reply(body={"object": "list", "data": [], "models": []})
        try:
            if request.method == "POST" and request.path == COMPACT:
                check_responses({**body, "store": False} if isinstance(body, dict) else body)
                return compaction_reply(body)
            if request.method == "POST" and request.path == RESPONSES:
                check_responses(body)
                return compaction_reply(body) if is_compaction(body) else self._response(body)
            if request.method == "POST" and request.path == CHAT:
                check_chat(body)
                return self._chat(body)
        except Rejection as exc:
            request.error = exc.message
            return Reply(exc.status, error_body(exc.message, param=exc.param))
        request.error = "not found"
        return Reply(404, error_body(f"Unknown path {request.path}", "not_found_error"))

    def _response(self, body: dict[str, Any]) -> Reply:
        if self.outputs is not None:
            if not self.outputs:
                raise Rejection("the fake's script has no output left")
            return Reply(body=_response(body, self.outputs.pop(0)))
        item_id = f"msg_{uuid.uuid4().hex[:24]}"
        part = {"type": "output_text", "text": self.answer, "annotations": []}
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        response = _response(body, [item])
        if not body.get("stream"):
            return Reply(body=response)
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        middle = [
            ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}}),
            ("response.content_part.added", {**where, "part": {**part, "text": ""}}),
            ("response.output_text.delta", {**where, "delta": self.answer}),
            ("response.output_text.done", {**where, "text": self.answer}),
            ("response.content_part.done", {**where, "part": part}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
        ]  # fmt: skip
        return _stream(response, middle)

    def _chat(self, body: dict[str, Any]) -> Reply:
        usage = {"prompt_tokens": input_tokens(body), "completion_tokens": 3}
        usage["total_tokens"] = usage["prompt_tokens"] + 3
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "created": int(time.time()),
            "model": body.get("model"),
        }
        if not body.get("stream"):
            message = {"role": "assistant", "content": self.answer}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return Reply(
                body={**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
        chunk = {**base, "object": "chat.completion.chunk"}
        deltas = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": self.answer}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage},
        ]
        chunks = [f"data: {json.dumps({**chunk, **d})}\n\n".encode() for d in deltas]
        return Reply(
            headers={"content-type": "text/event-stream"}, chunks=[*chunks, b"data: [DONE]\n\n"]
        )


def input_tokens(body: dict[str, Any]) -> int:
    """A stable stand-in for the API's input token count (~4 bytes per token)."""
    seen = {k: body.get(k) for k in ("instructions", "input", "messages", "tools")}
    return max(1, len(json.dumps(seen, ensure_ascii=False)) // 4)


def _response(body: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
    tokens = input_tokens(body)
    return {
        "id": f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model"),
        "output": output,
        "usage": {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 4,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + 4,
        },
    }


def _stream(response: dict[str, Any], middle: list[tuple[str, dict[str, Any]]]) -> Reply:
    """``response`` as the Responses streaming events: created, ``middle``, completed."""
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    events = [
        ("response.created", {"response": pending}),
        ("response.in_progress", {"response": pending}),
        *middle,
        ("response.completed", {"response": response}),
    ]
    typed = [
        (name, {"type": name, **data, "sequence_number": n})
        for n, (name, data) in enumerate(events)
    ]
    return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(typed))


def is_compaction(body: Any) -> bool:
    """True for Codex's compaction request: its input ends with a ``compaction_trigger``."""
    items = body.get("input") if isinstance(body, dict) else None
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("type") == "compaction_trigger" for i in items
    )


def compaction_reply(body: dict[str, Any]) -> Reply:
    """A compaction: exactly one ``compaction`` output item (streamed when asked)."""
    item = {
        "type": "compaction",
        "id": f"cmp_{uuid.uuid4().hex[:24]}",
        "encrypted_content": "fake-compaction-" + uuid.uuid4().hex,
    }
    response = _response(body, [item])
    if not body.get("stream"):
        return Reply(body=response)
    return _stream(
        response,
        [
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
        ],
    )


def compactions(server: FakeServer) -> int:
    """How many compaction requests (Codex's remote compaction) ``server`` received."""
    return sum(
        1
        for r in server.requests
        if r.path == COMPACT or (r.path == RESPONSES and is_compaction(r.body))
    )
