"""One loopback HTTP server for every fake API: it records each request and answers it.

A :class:`FakeServer` listens on 127.0.0.1 (a free port) and stops by itself after
``lifetime_s``. Each request is recorded as a :class:`Request` (credentials redacted: a
test sees *that* a key was sent, never the key) and answered by the first scripted
:class:`Reply` queued with :meth:`FakeServer.push` (for its path, if one was named), else
by the handler, usually one of the API models of this package. A reply may arrive late
(``delay``), stream in chunks, or break the connection off mid-stream (``reset_after``),
as an upstream that resets does. A WebSocket upgrade is answered 426, as the OpenAI API
does for clients that try one first.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CREDENTIALS = ("x-api-key", "authorization")
"""Request headers whose values are never stored."""


@dataclass
class Reply:
    """One HTTP answer.

    Attributes:
        status: the HTTP status.
        body: a dict or list (sent as JSON), or str/bytes sent as they are.
        headers: extra headers (``content-type`` defaults to JSON).
        delay: seconds to wait before answering (longer than a client's timeout provokes it).
        chunks: a streamed body, written one chunk at a time (``body`` is then ignored).
        reset_after: break the connection off (TCP reset) after this many chunks.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: list[bytes] | None = None
    reset_after: int | None = None

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


@dataclass
class Request:
    """A request the server received, and how it was answered."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    size: int
    status: int = 0
    error: str | None = None

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300

    @property
    def credential(self) -> bool:
        """The request carried an API key or a bearer token."""
        return any(name in self.headers for name in CREDENTIALS)

    @property
    def system(self) -> str:
        """The Anthropic system prompt, as text."""
        system = self.body.get("system", "") if isinstance(self.body, dict) else ""
        if isinstance(system, list):
            return "".join(b.get("text", "") for b in system if isinstance(b, dict))
        return str(system)

    @property
    def prompt(self) -> str:
        """The text of the last user message."""
        for msg in reversed(self._messages()):
            if msg.get("role") == "user":
                return content_text(msg.get("content"))
        return ""

    @property
    def all_text(self) -> str:
        """The text of every message, joined by newlines."""
        return "\n".join(content_text(m.get("content")) for m in self._messages())

    def _messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return [m for m in messages if isinstance(m, dict)]


def content_text(content: Any) -> str:
    """The text of a message's content (a string, or the text of its blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def sse(events: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    """Server-sent events, one ``event:``/``data:`` record per chunk."""
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


Handler = Callable[[Request], Reply]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-request (a timeout test) is not an error here."""


class FakeServer:
    """A threaded HTTP server on 127.0.0.1 that records every request; a context manager."""

    def __init__(self, handler: Handler, *, lifetime_s: float = 900.0) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self._script: list[tuple[str | None, Reply]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True
        self._timer.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give a client or an SDK as its base URL."""
        return f"http://127.0.0.1:{self.port}"

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

    def posts(self, path: str) -> list[Request]:
        """The POST requests to ``path``."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path == path]

    def rejected(self) -> list[Request]:
        """The requests answered with an API error."""
        with self._lock:
            return [r for r in self.requests if r.error is not None]

    def close(self) -> None:
        """Stop serving; late replies still waiting are abandoned at once."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(self, request: Request) -> Reply:
        """The reply for ``request`` (recorded first): scripted, else the handler's."""
        reply = self._scripted(request) or self.handler(request)
        request.status = reply.status
        return reply

    def _scripted(self, request: Request) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            for i, (path, _reply) in enumerate(self._script):
                if path is None or path == request.path:
                    return self._script.pop(i)[1]
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _QuietServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read the recorded requests instead."""

    def do_HEAD(self) -> None:  # noqa: N802 (the http.server API)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def _handle(self) -> None:
        fake = self.server.fake
        request = self._read()
        if self.headers.get("upgrade", "").lower() == "websocket":
            fake.requests.append(request)
            request.status = 426
            self._send(Reply(426, {"error": "upgrade not supported"}))
            return
        reply = fake.answer(request)
        if reply.delay and fake._closing.wait(reply.delay):
            return  # the server is closing: drop the late reply
        try:
            self._send(reply)
        except OSError:
            pass  # the client gave up (a timeout test): nothing to answer

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

    def _read(self) -> Request:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except (ValueError, RecursionError):  # not JSON, or nested deeper than json parses
            body = raw.decode("utf-8", "replace")
        headers = {
            k.lower(): ("<redacted>" if k.lower() in CREDENTIALS else v)
            for k, v in self.headers.items()
        }
        path, _, query = self.path.partition("?")
        return Request(self.command, path, query, headers, body, len(raw))

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        if not any(k.lower() == "content-type" for k in reply.headers):
            self.send_header("content-type", "application/json")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        if reply.chunks is None:
            data = reply.payload()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("connection", "close")
        self.end_headers()
        for n, chunk in enumerate(reply.chunks):
            if reply.reset_after is not None and n >= reply.reset_after:
                self._reset()
                return
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def _reset(self) -> None:
        """Break the connection off with a TCP reset, as a failing upstream does."""
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True
