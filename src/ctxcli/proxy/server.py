"""Run the proxy with uvicorn: in the foreground (``ctx proxy``) or on a thread (``ctx wrap``)."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn

from ctxcli.proxy.app import create_app
from ctxcli.proxy.engine import ProxyCore

LOOPBACK = "127.0.0.1"


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def _config(core: ProxyCore) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(core),
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="websockets-sansio",
    )


def serve(core: ProxyCore, *, host: str = LOOPBACK, port: int = 8787) -> None:
    """Serve until interrupted (Ctrl-C)."""
    sock = _bind(host, port)
    uvicorn.Server(_config(core)).run(sockets=[sock])


class ProxyServer:
    """The proxy on a background thread, on a free loopback port unless one is given.

    Use as a context manager; ``url`` is the base URL to point a client at. Leaving the
    block stops the server (the lifespan writes the final stats).
    """

    def __init__(self, core: ProxyCore, *, host: str = LOOPBACK, port: int = 0) -> None:
        self.core = core
        self._sock = _bind(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = uvicorn.Server(_config(core))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> ProxyServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the ctx proxy did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
