"""A loopback stand-in for the Anthropic Messages API, to test the real SDK path offline.

Start it, point the official ``anthropic`` SDK at it with ``base_url``, and script
what it answers::

    with AnthropicServer() as server:
        server.push(rate_limited(), message("[0, 2]"))  # a 429, then a success
        client = anthropic.Anthropic(api_key="test-key", base_url=server.base_url)
        ...
        assert server.count("/v1/messages") == 2

Scripted replies are used first, in order (optionally only for one path); once the
queue is empty the ``handler`` answers (by default: ``message("ok")`` for
``/v1/messages`` and a word count for ``/v1/messages/count_tokens``). Every request
is recorded, with the API key redacted. ``timeout(seconds)`` answers late (longer
than the client's timeout to provoke a real timeout), ``garbage()`` answers with a
body that is not JSON, ``rate_limited()`` and ``server_error()`` answer 429 and 5xx
with a tiny ``retry-after-ms`` so the SDK's real retries run without sleeping.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"


@dataclass
class Reply:
    """One HTTP answer: status, body (dict/list as JSON, str or bytes as is), headers, delay."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Request:
    """A request the server received (the API key is never stored)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def system(self) -> str:
        """The system prompt, as text."""
        system = self.body.get("system", "") if isinstance(self.body, dict) else ""
        if isinstance(system, list):
            return "".join(b.get("text", "") for b in system if isinstance(b, dict))
        return str(system)

    @property
    def prompt(self) -> str:
        """The text of the last user message."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        for msg in reversed(messages):
            if msg.get("role") == "user":
                return _content_text(msg.get("content"))
        return ""

    @property
    def all_text(self) -> str:
        """The text of every message, joined by newlines."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return "\n".join(_content_text(m.get("content")) for m in messages)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


# -- reply builders ---------------------------------------------------------------------


def message(text: str, *, model: str = "claude-haiku-4-5", stop_reason: str = "end_turn") -> Reply:
    """A successful Messages API response holding one text block."""
    return Reply(
        body={
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }
    )


def tokens(n: int) -> Reply:
    """A successful count_tokens response."""
    return Reply(body={"input_tokens": n})


def api_error(status: int, kind: str, text: str, retry_after_ms: int | None = 1) -> Reply:
    """An error in the API's JSON shape; ``retry_after_ms`` keeps SDK retries instant."""
    headers = {} if retry_after_ms is None else {"retry-after-ms": str(retry_after_ms)}
    return Reply(
        status, {"type": "error", "error": {"type": kind, "message": text}}, headers=headers
    )


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
    return Reply(delay=seconds, body=message("late").body)


def default_handler(request: Request) -> Reply:
    """``message("ok")`` for messages; for count_tokens, 7 + the number of words."""
    if request.path == COUNT_TOKENS:
        return tokens(7 + len(request.all_text.split()))
    if request.path == MESSAGES:
        return message("ok")
    return api_error(404, "not_found_error", f"no route {request.path}", None)


# -- the server -------------------------------------------------------------------------


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-request (a timeout test) is not an error here."""


class AnthropicServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) that answers like the API."""

    def __init__(self, handler: Callable[[Request], Reply] | None = None) -> None:
        self.handler = handler or default_handler
        self.requests: list[Request] = []
        self._script: list[tuple[str | None, Reply]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as ``base_url``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def push(self, *replies: Reply, path: str | None = None) -> None:
        """Queue replies, used in order before the handler (only for ``path`` if given)."""
        with self._lock:
            self._script.extend((path, r) for r in replies)

    def count(self, path: str | None = None) -> int:
        """Requests received so far (to ``path`` only, if given)."""
        with self._lock:
            return sum(1 for r in self.requests if path is None or r.path == path)

    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._script)

    def close(self) -> None:
        """Stop serving; late replies still waiting are abandoned at once."""
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> AnthropicServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            for i, (path, reply) in enumerate(self._script):
                if path is None or path == request.path:
                    del self._script[i]
                    return reply
        return self.handler(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {
                    k.lower(): ("<redacted>" if k.lower() in ("x-api-key", "authorization") else v)
                    for k, v in self.headers.items()
                }
                path = self.path.split("?", 1)[0]
                reply = server._next_reply(Request("POST", path, headers, body))
                if reply.delay and server._closing.wait(reply.delay):
                    return  # the server is closing: drop the late reply
                if isinstance(reply.body, bytes):
                    data = reply.body
                elif isinstance(reply.body, str):
                    data = reply.body.encode()
                else:
                    data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    if not any(k.lower() == "content-type" for k in reply.headers):
                        self.send_header("content-type", "application/json")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout test): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                """Stay quiet: tests read the recorded requests instead."""

        return Handler
