"""``ctx proxy``: the reducer between a coding agent and its model API, priced with prompt caching.

Library entry points: :class:`ProxySettings`, :class:`ProxyCore` (rewrite and account for
one request body), :func:`create_app` (the ASGI app), :class:`ProxyServer` (run it on a
thread), :func:`run_wrapped` (``ctx wrap``). Needs the ``proxy`` extra.
"""

from ctxcli.proxy.app import create_app
from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer, serve
from ctxcli.proxy.wrap import run_wrapped

__all__ = ["ProxyCore", "ProxyServer", "ProxySettings", "create_app", "run_wrapped", "serve"]
