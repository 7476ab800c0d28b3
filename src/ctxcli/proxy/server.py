"""Run the proxy with uvicorn: in the foreground (``ctx proxy``) or on a thread (``ctx wrap``)."""

from __future__ import annotations

import copy
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import uvicorn

from ctxcli.core.errors import CtxError
from ctxcli.proxy.app import create_app
from ctxcli.proxy.engine import ProxyCore

__all__ = ["LOOPBACK", "ProxyServer", "serve"]

LOOPBACK = "127.0.0.1"


def _bind(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``.

    Raises:
        CtxError: the address is taken or cannot be used.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # Listening at once: a client that connects before the server starts waits in
        # the backlog instead of being refused, so "listening on" is true when printed.
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise CtxError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
            "choose another port or stop what listens there"
        ) from None
    sock.set_inheritable(True)
    return sock


_UNFINISHED = "ASGI callable returned without completing response."


class _QuietBreaks(logging.Filter):
    """Drops uvicorn's line for an answer the proxy broke off on purpose.

    The app breaks a client's connection off when the upstream broke its answer off
    (``app._Relay``); it has already said so in one warning line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _UNFINISHED


def _log_config() -> dict[str, Any]:
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["filters"] = {"broken_relay": {"()": _QuietBreaks}}
    config["handlers"]["default"]["filters"] = ["broken_relay"]
    return config


def _config(core: ProxyCore) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(core),
        log_level="warning",
        log_config=_log_config(),
        access_log=False,
        lifespan="on",
        ws="websockets-sansio",
    )


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM ends the server as Ctrl-C does.

    uvicorn shuts down gracefully on either, then raises the signal again with the
    handler it found: for SIGTERM the default one, which would kill the process before
    the run is finished. Here it becomes a KeyboardInterrupt, like SIGINT.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve(
    core: ProxyCore,
    *,
    host: str = LOOPBACK,
    port: int = 8787,
    on_listening: Callable[[str], None] | None = None,
) -> str | None:
    """Serve until interrupted (Ctrl-C or SIGTERM), then end the run (:meth:`ProxyCore.finish`).

    ``on_listening`` gets the URL once the port is bound. Returns the directory the
    hints cite, or None when nothing was offloaded.

    Raises:
        CtxError: the port cannot be bound.
    """
    try:
        server = ProxyServer(core, host=host, port=port)
        if on_listening is not None:
            on_listening(server.url)
        with _stopped_by_sigterm():
            server.serve_forever()
    except KeyboardInterrupt:
        pass  # uvicorn shut down gracefully and raised the signal again: the run's end
    finally:
        kept = core.finish()
    return kept


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
        """The proxy's base URL."""
        return f"http://{self.host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve on this thread until interrupted (Ctrl-C) or :meth:`stop`."""
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self._sock.close()

    def start(self, timeout: float = 20.0) -> ProxyServer:
        """Serve in a thread; return once the socket accepts (RuntimeError after ``timeout``)."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the ctx proxy did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and close the socket."""
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
