"""The HTTP side of the proxy: a Starlette app forwarding to the upstream APIs with httpx.

Each request goes where :mod:`ctxcli.proxy.routes` says (by configuration, never by its
headers; a path routed nowhere is answered 404). Model requests (``POST /v1/messages``,
``/v1/chat/completions``, ``/v1/responses``) go through :class:`ProxyCore`; every other
path is forwarded as it is. Answers stream back untouched (raw bytes, the upstream's
status and headers); on the way the proxy reads the ``usage`` the upstream reports, from
the SSE events or the JSON body. An upstream that breaks off mid-answer costs one warning
line, and the client's connection is broken off after the bytes that came (as it would
be without the proxy). The proxy's own errors are in the addressed API's error shape. A
WebSocket upgrade is refused with 426 so that clients that try one first (Codex) fall
back to HTTP. ``GET /stats`` answers the proxy's figures as JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import Send
from starlette.websockets import WebSocket

from ctxcli.proxy import routes
from ctxcli.proxy.engine import ProxyCore, RequestRecord
from ctxcli.proxy.routes import Provider
from ctxcli.proxy.shapes import Api

__all__ = ["create_app", "error_response"]

_HOP_BY_HOP = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
_MAX_CAPTURE = 16 * 1024 * 1024


def _join(base: str, path: str, query: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        path = path[3:]
    return base + path + (f"?{query}" if query else "")


def create_app(core: ProxyCore) -> Starlette:
    """The ASGI app of a proxy run by ``core``."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(connect=30.0, read=None, write=60.0, pool=30.0)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            app.state.client = client
            yield
        core.write_stats()

    async def stats(request: Request) -> Response:
        return JSONResponse(core.stats())

    async def forward(request: Request) -> Response:
        client: httpx.AsyncClient = request.app.state.client
        route = routes.route(core.settings, request.url.path)
        if route is None:
            base = f"{request.url.scheme}://{request.url.netloc}"
            message = routes.unrouted_message(request.url.path, base)
            return error_response(None, 404, "not_found_error", message)
        raw = await request.body()
        record: RequestRecord | None = None
        if route.api is not None and request.method == "POST":
            # Reducing is CPU work: off the event loop, so other streams keep flowing.
            prepared = await run_in_threadpool(core.prepare, route.api, raw)
            raw, record = prepared.body, prepared.record
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != "accept-encoding"
        ]
        # Identity encoding, so the proxy can read the usage the upstream reports.
        headers.append(("accept-encoding", "identity"))
        url = _join(route.base, route.path, request.url.query)
        upstream_request = client.build_request(request.method, url, headers=headers, content=raw)
        try:
            upstream = await client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            core.warn(f"upstream {url} failed: {type(exc).__name__}: {exc}")
            return error_response(route.provider, 502, "api_error", f"ctx proxy: {exc}")
        return _relay(core, upstream, url, record, route.api)

    async def refuse_websocket(websocket: WebSocket) -> None:
        await websocket.send_denial_response(
            JSONResponse({"error": "ctx proxy speaks HTTP only; retry without WebSocket"}, 426)
        )

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    table = [
        Route("/stats", stats, methods=["GET"]),
        Route("/{path:path}", forward, methods=methods),
        WebSocketRoute("/{path:path}", refuse_websocket),
    ]
    return Starlette(routes=table, lifespan=lifespan)


def error_response(provider: Provider | None, status: int, kind: str, message: str) -> Response:
    """An error of the proxy's own, in the addressed API's shape (both when none is known)."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if provider == "anthropic":
        return JSONResponse({"type": "error", "error": error}, status)
    error.update(param=None, code=None)  # OpenAI's shape: {"error": {message, type, param, code}}
    if provider == "openai":
        return JSONResponse({"error": error}, status)
    return JSONResponse({"type": "error", "error": error}, status)


class _Relay(StreamingResponse):
    """The upstream's answer, streamed; broken off when the upstream broke it off.

    A clean end would tell the client it has the whole answer. Returning without the
    last body message makes the server close the connection instead, as the upstream's
    did (uvicorn's own line about it is filtered out: the proxy already said why).
    """

    broken = False

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if not self.broken:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _relay(
    core: ProxyCore,
    upstream: httpx.Response,
    url: str,
    record: RequestRecord | None,
    api: Api | None,
) -> _Relay:
    """Stream ``upstream`` back, reading its usage on the way (model endpoints only)."""
    out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
    reader = _UsageReader("text/event-stream" in upstream.headers.get("content-type", ""))

    async def chunks() -> AsyncIterator[bytes]:
        size = 0
        try:
            async for chunk in upstream.aiter_raw():
                if api is not None:
                    reader.feed(chunk)
                size += len(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            response.broken = True
            why = str(exc) or type(exc).__name__
            core.warn(f"upstream {url} broke off its answer after {size:,} bytes ({why})")
        finally:
            await upstream.aclose()
            if api is not None and upstream.status_code < 400:
                core.record_usage(record, reader.usage())

    response = _Relay(chunks(), status_code=upstream.status_code, headers=out_headers)
    return response


class _UsageReader:
    """Collects the ``usage`` of an answer while it streams past (SSE or JSON)."""

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self._buffer = b""
        self._size = 0
        self._usage: dict[str, int] = {}

    def feed(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > _MAX_CAPTURE:
            return
        self._buffer += chunk
        if self.sse:
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"data:"):
                    self._event(line[5:].strip())

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        message = event.get("message") or event.get("response")
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            self._merge(message["usage"])
        if isinstance(event.get("usage"), dict):
            self._merge(event["usage"])

    def _merge(self, usage: dict[str, Any]) -> None:
        for key, value in _normalise(usage).items():
            self._usage[key] = value  # later events carry the running totals

    def usage(self) -> dict[str, int]:
        if not self.sse and self._buffer:
            try:
                body = json.loads(self._buffer)
            except ValueError:
                return {}
            if isinstance(body, dict) and isinstance(body.get("usage"), dict):
                self._merge(body["usage"])
        return dict(self._usage)


def _normalise(usage: dict[str, Any]) -> dict[str, int]:
    """Anthropic's usage fields, from either provider's spelling."""
    out: dict[str, int] = {}
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
        if isinstance(usage.get(key), int):
            out[key] = usage[key]
    if isinstance(usage.get("cache_creation_input_tokens"), int):
        out["cache_creation_input_tokens"] = usage["cache_creation_input_tokens"]
    if isinstance(usage.get("prompt_tokens"), int):  # OpenAI chat
        out["input_tokens"] = usage["prompt_tokens"]
    if isinstance(usage.get("completion_tokens"), int):
        out["output_tokens"] = usage["completion_tokens"]
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out["cache_read_input_tokens"] = details["cached_tokens"]
    return out
